/**
 * A seeded, generated long-dialogue memory corpus for the recall benchmark, in the spirit
 * of the public long-conversation benchmarks (LoCoMo): many sessions between named speakers,
 * each dated in its header, mostly small talk and work chatter about recurring people and
 * things, with facts stated once (or split over a question and its answer) and questions
 * asked about them later, the way a person would ask them — not in the words of the fact.
 *
 * What becomes a memory entry: every turn (`[14 Mar 2024] Maria: …`, the session's date
 * carried along as the indexer would from the session header) and every session header;
 * pasted tool output (logs, exports, ledgers) is split with the service's own `splitPassages`.
 *
 * Query types:
 *  - `single-turn`: a fact stated in one turn, asked in other words ("what kind of dog did
 *    Maria get?" for "we finally brought home a beagle from the shelter");
 *  - `two-turn`: the fact needs a question and its answer ("any news from Globex?" — "they
 *    offered me the job"); gold is either turn;
 *  - `temporal`: "when did …" — the turn that says it happened ("today was my first day…");
 *  - `speaker`: "what did Omar say about the Porto offsite?" — several people talk about the
 *    same thing in different sessions; gold is that speaker's turn;
 *  - `identifier`: a ticket id, invoice number, host, version, commit or path on one line of
 *    a long pasted output full of identifiers of the same shape.
 * Queries alternate per type into a tuning half and a held-out half (`half`).
 */
import { appImport } from './app.js'
import { Rng } from './memory-corpus.js'

const { splitPassages } = await appImport<typeof import('../../src/memory/passages.js')>('memory/passages.js')

export type DialogueQueryType = 'single-turn' | 'two-turn' | 'temporal' | 'speaker' | 'identifier'
export const DIALOGUE_TYPES: readonly DialogueQueryType[] = ['single-turn', 'two-turn', 'temporal', 'speaker', 'identifier']

export interface DialogueQuery {
  type: DialogueQueryType
  text: string
  /** Passage indexes that answer it (any one of them counts). */
  gold: number[]
  /** Deterministic split: every other query of a type is held out for reporting. */
  half: 'tune' | 'held-out'
}

export interface DialogueCorpus {
  passages: string[]
  queries: DialogueQuery[]
  stats: { sessions: number; turns: number; pastes: number; speakers: number }
}

export const DIALOGUE_SEED = 20261124

const SPEAKERS = ['Maria', 'Tom', 'Priya', 'Daniel', 'Aiko', 'Samuel', 'Lena', 'Omar', 'Grace', 'Felix', 'Nadia', 'Kofi', 'Ingrid', 'Mateo']
const CITIES = ['Lisbon', 'Porto', 'Berlin', 'Leeds', 'Valencia', 'Gdansk', 'Utrecht', 'Bologna', 'Tallinn', 'Lyon']
const COMPANIES = ['Globex', 'Initech', 'Northwind', 'Umbrella Health', 'Hooli', 'Stark Logistics', 'Vandelay', 'Acme Robotics']
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December']
const MON = MONTHS.map((m) => m.slice(0, 3))

/** A fact frame: how it is said, how a person later asks for it, and near misses said by others. */
interface Frame {
  key: string
  values: readonly string[]
  say: (v: string, r: Rng) => string
  ask: (s: string, v: string, r: Rng) => string
  when: (s: string, v: string, r: Rng) => string
  /** The same topic without the fact (someone else's pet, a plan, a wish). */
  near: (v: string, r: Rng) => string
}

const FRAMES: Frame[] = [
  {
    key: 'pet',
    values: ['beagle', 'greyhound', 'border collie', 'dachshund', 'labrador', 'whippet'],
    say: (v, r) =>
      r.pick([
        `we finally brought home a ${v} from the shelter, she's called ${r.pick(['Biscuit', 'Pepper', 'Luna', 'Mochi'])}`,
        `meet the newest member of the household: a ${v} puppy, three months old`,
      ]),
    ask: (s, _v, r) => r.pick([`what kind of dog did ${s} get?`, `does ${s} have a pet now?`, `which breed is ${s}'s new puppy?`]),
    when: (s, _v, r) => r.pick([`when did ${s} adopt the dog?`, `when did ${s} get the puppy?`]),
    near: (v, r) =>
      r.pick([
        `I'd love a ${v} one day, but the flat is far too small`,
        `my neighbour's ${v} barked all night again`,
        `the cat knocked the plant off the windowsill again`,
      ]),
  },
  {
    key: 'job',
    values: COMPANIES,
    say: (v, r) =>
      r.pick([
        `I handed in my notice, I'm joining ${v} as a team lead`,
        `today was my first day at ${v}, the onboarding was chaotic but nice`,
      ]),
    ask: (s, _v, r) => r.pick([`where does ${s} work now?`, `which company hired ${s}?`, `who is ${s}'s new employer?`]),
    when: (s, v, r) => r.pick([`when did ${s} start at ${v}?`, `when did ${s} change jobs?`]),
    near: (v, r) =>
      r.pick([
        `${v} keeps posting roles on the careers page but nobody ever hears back`,
        `a recruiter from ${v} called me, I said I'm not looking`,
        `my cousin used to work at ${v}, she hated the commute`,
      ]),
  },
  {
    key: 'move',
    values: CITIES,
    say: (v, r) =>
      r.pick([`we signed the lease on a flat in ${v}, the movers come on Saturday`, `the boxes are packed, we're off to ${v} for good`]),
    ask: (s, _v, r) => r.pick([`which city is ${s} relocating to?`, `where is ${s} going to live?`, `did ${s} move house?`]),
    when: (s, _v, r) => r.pick([`when did ${s} move?`, `when did ${s} relocate?`]),
    near: (v, r) =>
      r.pick([
        `${v} was lovely last spring, we should go back for a weekend`,
        `rents in ${v} are insane right now`,
        `there's a food festival in ${v} next month`,
      ]),
  },
  {
    key: 'instrument',
    values: ['cello', 'violin', 'saxophone', 'piano', 'drums', 'ukulele'],
    say: (v, r) =>
      r.pick([
        `I've started ${v} lessons on Thursday evenings, my fingers hurt`,
        `I bought a second-hand ${v} and a teacher comes every week`,
      ]),
    ask: (s, _v, r) => r.pick([`what instrument is ${s} learning?`, `does ${s} play music?`, `what is ${s} practising in the evenings?`]),
    when: (s, _v, r) => r.pick([`when did ${s} take up music?`, `when did ${s} begin the music lessons?`]),
    near: (v, r) =>
      r.pick([
        `the ${v} player at the concert was incredible`,
        `my son wants to quit ${v}, no idea what to do`,
        `someone in the flat upstairs practises ${v} at midnight`,
      ]),
  },
  {
    key: 'diet',
    values: ['meat', 'dairy', 'sugar', 'alcohol'],
    say: (v, r) =>
      r.pick([`I cut out ${v} completely, it's been easier than I expected`, `no more ${v} for me, six weeks now and I feel great`]),
    ask: (s, v, r) =>
      r.pick([
        v === 'meat' ? `is ${s} vegetarian now?` : `what did ${s} give up eating or drinking?`,
        `is ${s} on some kind of diet?`,
        `what has ${s} stopped having?`,
      ]),
    when: (s, _v, r) => r.pick([`when did ${s} change the diet?`, `when did ${s} quit it?`]),
    near: (v, r) =>
      r.pick([
        `the new place downtown does great food without ${v}`,
        `my doctor keeps telling me to eat less ${v}`,
        `I read an article about ${v} and sleep`,
      ]),
  },
  {
    key: 'injury',
    values: ['football', 'bouldering', 'tennis', 'skiing', 'basketball'],
    say: (v, r) =>
      r.pick([`I twisted my ankle at ${v} and now I'm on crutches for two weeks`, `broke my wrist ${v}, typing with one hand is slow`]),
    ask: (s, _v, r) => r.pick([`how did ${s} get hurt?`, `why is ${s} injured?`, `what happened to ${s}'s leg or arm?`]),
    when: (s, _v, r) => r.pick([`when did ${s} have the accident?`, `when did ${s} get injured?`]),
    near: (v, r) =>
      r.pick([
        `watched the ${v} final last night, what a game`,
        `thinking of signing up for ${v} on Wednesdays`,
        `the ${v} club is raising its fees again`,
      ]),
  },
  {
    key: 'car',
    values: ['Tesla', 'Renault Zoe', 'Nissan Leaf', 'Kia EV6', 'Polestar'],
    say: (v, r) =>
      r.pick([`sold the old Volvo, we bought a ${v} instead`, `picked up the new ${v} from the dealer, charging it is a learning curve`]),
    ask: (s, _v, r) => r.pick([`what car does ${s} drive now?`, `which vehicle did ${s} buy?`, `did ${s} go electric?`]),
    when: (s, _v, r) => r.pick([`when did ${s} buy the new car?`, `when did ${s} get the electric car?`]),
    near: (v, r) =>
      r.pick([
        `a ${v} nearly hit me on the roundabout`,
        `the ${v} ads are everywhere`,
        `my brother is thinking about a ${v} but the range worries him`,
      ]),
  },
  {
    key: 'language',
    values: ['Japanese', 'Portuguese', 'Korean', 'Greek', 'Dutch'],
    say: (v, r) =>
      r.pick([`I've been doing ${v} flashcards on the train every morning`, `signed up for an evening class in ${v}, homework already`]),
    ask: (s, _v, r) => r.pick([`which language is ${s} studying?`, `what is ${s} learning to speak?`]),
    when: (s, _v, r) => r.pick([`when did ${s} begin the language course?`, `when did ${s} start studying the language?`]),
    near: (v, r) =>
      r.pick([
        `the ${v} film at the festival had terrible subtitles`,
        `our new client only answers emails in ${v}`,
        `there's a ${v} bakery near the office now`,
      ]),
  },
  {
    key: 'race',
    values: ['half marathon', 'marathon', '10k', 'triathlon', 'ultra trail'],
    say: (v, r) =>
      r.pick([`I registered for the ${v} in ${r.pick(CITIES)}, training starts Monday`, `paid the entry fee for a ${v}, no way back now`]),
    ask: (s, _v, r) => r.pick([`is ${s} running a race?`, `what event is ${s} training for?`, `what competition did ${s} enter?`]),
    when: (s, _v, r) => r.pick([`when did ${s} sign up for the race?`, `when did ${s} enter the competition?`]),
    near: (v, r) =>
      r.pick([
        `the ${v} closed half the roads in town on Sunday`,
        `watching a ${v} on TV is weirdly relaxing`,
        `my colleague finished a ${v} and can't walk`,
      ]),
  },
  {
    key: 'baby',
    values: ['sister', 'brother', 'cousin', 'best friend'],
    say: (v, r) =>
      r.pick([`my ${v} just had twins, I'm an aunt twice over!`, `my ${v} had a baby girl last night, everyone is doing well`]),
    ask: (s, _v, r) => r.pick([`who in ${s}'s family had a baby?`, `whose newborn was ${s} talking about?`]),
    when: (s, _v, r) => r.pick([`when was the baby born in ${s}'s family?`, `when did ${s} become an aunt or uncle?`]),
    near: (v, r) =>
      r.pick([
        `my ${v} is visiting next weekend`,
        `my ${v} keeps sending me memes at 3am`,
        `it's my ${v}'s birthday on Friday, no idea what to get`,
      ]),
  },
  {
    key: 'renovation',
    values: ['kitchen', 'bathroom', 'attic', 'garden'],
    say: (v, r) =>
      r.pick([
        `the builders ripped out the whole ${v}, we're living on takeaway`,
        `we're redoing the ${v}, dust everywhere and the budget is gone`,
      ]),
    ask: (s, _v, r) => r.pick([`what is ${s} renovating at home?`, `which room are ${s}'s builders working on?`]),
    when: (s, _v, r) => r.pick([`when did the building work start at ${s}'s place?`, `when did ${s}'s renovation begin?`]),
    near: (v, r) =>
      r.pick([`saw a lovely ${v} in a magazine`, `our ${v} needs cleaning, I keep putting it off`, `the ${v} at the rental was tiny`]),
  },
]

/** Topics several people comment on (speaker-attributed questions). */
const TOPICS: Array<{ name: string; opinions: string[] }> = [
  {
    name: 'the Porto offsite',
    opinions: [
      'the Porto offsite was far too packed, not a minute to breathe',
      'Porto was the best offsite we ever had, the workshops actually worked',
      'the offsite in Porto cost a fortune for two days of slides',
      'I came back from Porto with a cold and no decisions made',
    ],
  },
  {
    name: 'the reorg',
    opinions: [
      'the reorg makes sense on paper but my team lost its designer',
      'honestly the reorg is a relief, fewer meetings for me',
      'nobody explained why the reorg happened, morale is low',
      'the reorg split our on-call rotation in half, nights are rough',
    ],
  },
  {
    name: 'the new coffee machine',
    opinions: [
      'the new coffee machine makes everything taste burnt',
      'that coffee machine is the best thing the office bought all year',
      'the coffee machine needs a PhD to operate',
      'the new machine broke on day two, back to instant coffee',
    ],
  },
  {
    name: 'Dune Part Two',
    opinions: [
      'Dune Part Two was gorgeous but way too long',
      'Dune Part Two is the best film I saw this year, the sound!',
      'I fell asleep during Dune Part Two, sorry',
      'the book is better than Dune Part Two, as always',
    ],
  },
  {
    name: 'the hybrid work policy',
    opinions: [
      'three office days a week is too many with my commute',
      'the hybrid policy finally gives me quiet days at home',
      'the hybrid rules are fine but the desks are always taken',
      'I think the hybrid policy will be reversed within a year',
    ],
  },
  {
    name: 'the Lisbon conference',
    opinions: [
      'the Lisbon conference talks were shallow, the hallway track was great',
      'my talk in Lisbon went well, lots of questions afterwards',
      'the Lisbon conference venue had no air conditioning',
      'Lisbon was worth it just for the networking dinner',
    ],
  },
  {
    name: 'the new manager',
    opinions: [
      'the new manager listens, which is a nice change',
      'the new manager micromanages every pull request',
      'the new manager cancelled our one-to-ones twice already',
      'the new manager got us budget for training, I am impressed',
    ],
  },
  {
    name: 'the team dinner',
    opinions: [
      'the team dinner was loud but fun',
      'the restaurant for the team dinner forgot the vegetarian dishes',
      'the team dinner went on until 2am, never again',
      'I skipped the team dinner, too tired',
    ],
  },
  {
    name: 'the quarterly planning',
    opinions: [
      'quarterly planning took four days for a spreadsheet',
      'the quarterly planning was the first one with real priorities',
      'quarterly planning ignored the tech debt again',
      'planning this quarter finally cut the roadmap in half',
    ],
  },
  {
    name: 'the hiking trip',
    opinions: [
      'the hiking trip was brutal, my knees still hurt',
      'the hike had the best views of the year',
      'it rained the whole hiking trip, we played cards in the hut',
      'the hiking trip guide got us lost twice',
    ],
  },
]

/** Two-turn facts: a question by someone else, then the answer; the query needs both. */
const TWO_TURN: Array<{
  v: readonly string[]
  q: (s: string, v: string) => string
  a: (v: string, r: Rng) => string
  ask: (s: string, v: string) => string
}> = [
  {
    v: COMPANIES,
    q: (s, v) => `${s}, any news from ${v} about the interview?`,
    a: (_v, r) => `yes! they made me an offer, I start in ${r.pick(MONTHS)}`,
    ask: (s, v) => `did ${s} get the job at ${v}?`,
  },
  {
    v: ['knee', 'shoulder', 'back', 'hip'],
    q: (s, v) => `${s}, what did the doctor say about your ${v}?`,
    a: (_v, r) => `surgery in ${r.pick(MONTHS)}, then six weeks of physio`,
    ask: (s, v) => `is ${s} having an operation on the ${v}?`,
  },
  {
    v: ['landlord', 'letting agent', 'housing association'],
    q: (s, v) => `did you hear back from your ${v}, ${s}?`,
    a: (_v, r) => `they're putting the rent up by ${r.range(8, 30) * 10} euros from ${r.pick(MONTHS)}`,
    ask: (s) => `how much more will ${s} pay for the flat?`,
  },
  {
    v: ['driving test', 'citizenship exam', 'sommelier exam', 'bar exam'],
    q: (s, v) => `how did the ${v} go, ${s}?`,
    a: (_v, r) => r.pick(['passed on the second attempt, so relieved', 'passed! first try, I still cannot believe it']),
    ask: (s, v) => `did ${s} pass the ${v}?`,
  },
  {
    v: CITIES,
    q: (s, v) => `${s}, did you decide on the venue near ${v}?`,
    a: (_v, r) => `the old mill by the river, booked for ${r.pick(MONTHS)}, the guest list is the next fight`,
    ask: (s) => `where is ${s} holding the wedding?`,
  },
  {
    v: ['mortgage', 'loan', 'grant'],
    q: (s, v) => `${s}, has the bank decided on the ${v}?`,
    a: () => `approved this morning, the paperwork was a nightmare`,
    ask: (s, v) => `did ${s}'s ${v} application go through?`,
  },
]

const SMALL_TALK: Array<(r: Rng, other: string) => string> = [
  () => 'morning! how was the weekend?',
  () => 'not bad, mostly slept and did laundry',
  (r) => `it's been raining in ${r.pick(CITIES)} for a week straight`,
  () => 'haha yes, same here',
  () => 'sorry, I was in back-to-back meetings',
  (r, o) => `${o}, did you see the email from facilities?`,
  () => 'I need more coffee before I can think',
  () => 'let us catch up properly on Thursday',
  () => 'good luck with the presentation!',
  (r) => `the train was ${r.range(10, 40)} minutes late again`,
  () => 'anyway, what is new with you?',
  () => 'I keep forgetting to book the dentist',
  (r) => `we watched ${r.pick(['a documentary about octopuses', 'the football', 'an old Hitchcock film', 'a cooking show'])} last night`,
  () => 'the kids have a school trip this week, so the mornings are calmer',
  () => 'lunch at the usual place?',
  () => 'honestly I just want a long holiday',
  (r) => `the ${r.pick(['deploy', 'release', 'migration', 'demo'])} went fine in the end`,
  (r) => `can you review my pull request when you have ${r.range(5, 20)} minutes?`,
  (r, o) => `thanks ${o}, that really helped`,
  () => 'the heating in the office is broken again',
  () => 'I started a new series, no spoilers please',
  (r) => `the budget review moved to ${r.pick(['Monday', 'Tuesday', 'Friday'])}`,
  () => 'my phone died, I missed all the messages',
  () => 'see you tomorrow then!',
]

/** Identifier outputs pasted into a session: a long block of same-shape lines. */
const PASTES: Array<{ intro: string; id: (r: Rng) => string; line: (r: Rng, id: string) => string; ask: (id: string, r: Rng) => string }> =
  [
    {
      intro: 'here is the ticket export from the support queue',
      id: (r) => `SUP-${r.range(45000, 49999)}`,
      line: (r, id) =>
        `${id} | ${r.pick(['open', 'pending', 'solved', 'escalated'])} | ${r.pick(['refund request', 'cannot log in', 'export stuck', 'wrong invoice address', 'API returns 429'])} | ${r.pick(SPEAKERS)}`,
      ask: (id, r) => r.pick([`what is the status of ${id}?`, `who is handling ${id}?`, `what was ${id} about?`]),
    },
    {
      intro: 'the ledger export for the quarter, as requested',
      id: (r) => `INV-2024-${String(r.range(1, 9999)).padStart(4, '0')}`,
      line: (r, id) =>
        `${id}  ${r.pick(COMPANIES)}  EUR ${r.range(200, 90000)}.${String(r.range(0, 99)).padStart(2, '0')}  ${r.pick(['paid', 'overdue', 'disputed', 'draft'])}`,
      ask: (id, r) => r.pick([`has ${id} been paid?`, `how much was ${id}?`, `which customer is ${id} for?`]),
    },
    {
      intro: 'pasting the host health output from the on-call dashboard',
      id: (r) =>
        `db-${r.pick(['replica', 'primary', 'cache', 'queue', 'search', 'batch'])}-${String(r.range(1, 99)).padStart(2, '0')}.${r.pick(['eu-west', 'us-east', 'ap-south'])}.internal`,
      line: (r, id) =>
        `${id} ${r.pick(['OK', 'WARN disk 91%', 'CRIT replication lag 340s', 'OK', 'WARN load 12.4'])} uptime ${r.range(1, 400)}d`,
      ask: (id, r) => r.pick([`what was wrong with ${id}?`, `is ${id} healthy?`]),
    },
    {
      intro: 'changelog of the dependency bumps in this release',
      id: (r) => `v${r.range(1, 9)}.${r.range(0, 30)}.${r.range(0, 40)}`,
      line: (r, id) =>
        `- ${r.pick(['pg', 'undici', 'fastify', 'pino', 'lmdb', 'zod'])} ${id}: ${r.pick(['fixes a memory leak in the pool', 'changes the default timeout', 'adds ESM exports', 'patches a CVE in the parser'])}`,
      ask: (id, r) => r.pick([`what changed in ${id}?`, `which library went to ${id}?`]),
    },
    {
      intro: 'git log of the branch before the merge',
      id: (r) => Array.from({ length: 7 }, () => '0123456789abcdef'[r.int(16)]).join(''),
      line: (r, id) =>
        `${id} ${r.pick(SPEAKERS)} ${r.pick(['fix flaky retry test', 'bump deps', 'refactor session cache', 'add audit log export', 'revert timeout change'])}`,
      ask: (id, r) => r.pick([`who wrote commit ${id}?`, `what did ${id} change?`]),
    },
    {
      intro: 'the config files the deploy touched',
      id: (r) =>
        `/srv/${r.pick(['billing', 'search', 'auth', 'export'])}/config/${r.pick(['limits', 'routes', 'flags', 'secrets'])}-${r.range(1, 99)}.yaml`,
      line: (r, id) => `${r.pick(['M', 'A', 'D'])} ${id} (${r.range(1, 300)} lines, owner ${r.pick(SPEAKERS)})`,
      ask: (id, r) => r.pick([`what happened to ${id} in the deploy?`, `who owns ${id}?`]),
    },
  ]

export interface DialogueCorpusOptions {
  seed?: number
  sessions?: number
}

/** The corpus for `seed`: sessions in date order, each turn an entry, queries split into halves. */
export function dialogueCorpus(opts: DialogueCorpusOptions = {}): DialogueCorpus {
  const r = new Rng(opts.seed ?? DIALOGUE_SEED)
  const nSessions = opts.sessions ?? 110
  // Each session: a pair of speakers and a list of planned turns; facts are planted into sessions at random.
  interface Turn {
    who: string
    text: string
    mark?: { q: number; both?: boolean }
  }
  interface Paste {
    who: string
    intro: string
    lines: string[]
    needle?: { q: number; id: string }
  }
  const sessions: Array<{ a: string; b: string; date: Date; items: Array<Turn | Paste> }> = []
  let day = Date.UTC(2023, 0, 9)
  for (let i = 0; i < nSessions; i++) {
    day += r.range(2, 9) * 86_400_000
    const [a, b] = r.sample(SPEAKERS, 2) as [string, string]
    sessions.push({ a, b, date: new Date(day), items: [] })
  }
  const queries: Array<Omit<DialogueQuery, 'gold' | 'half'>> = []
  const insert = (s: (typeof sessions)[number], items: Array<Turn | Paste>) => {
    const at = r.int(s.items.length + 1)
    s.items.splice(at, 0, ...items)
  }
  /** A session `who` takes part in (every speaker is in some: the pairs are drawn from few names). */
  const anySession = (who?: string) => {
    const theirs = who ? sessions.filter((s) => s.a === who || s.b === who) : sessions
    return r.pick(theirs.length ? theirs : sessions)
  }
  const partner = (s: (typeof sessions)[number], who: string) => (s.a === who ? s.b : s.a)

  // Single-turn and temporal facts: distinct (frame, speaker) pairs, so every question has one answer.
  const pairs = r.shuffle(FRAMES.flatMap((f) => SPEAKERS.map((s) => ({ f, s }))))
  const factCount = 64
  pairs.slice(0, factCount * 2).forEach(({ f, s }, i) => {
    const v = r.pick(f.values)
    const type = i % 2 === 0 ? 'single-turn' : 'temporal'
    queries.push({ type, text: type === 'single-turn' ? f.ask(s, v, r) : f.when(s, v, r) })
    insert(anySession(s), [{ who: s, text: f.say(v, r), mark: { q: queries.length - 1 } }])
  })
  // Near misses of every frame: the same topic, said by anyone, never the fact.
  for (let i = 0; i < 360; i++) {
    const f = r.pick(FRAMES)
    const s = anySession()
    insert(s, [{ who: r.pick([s.a, s.b]), text: f.near(r.pick(f.values), r) }])
  }
  // Two-turn facts.
  for (let i = 0; i < 64; i++) {
    const t = r.pick(TWO_TURN)
    const who = SPEAKERS[i % SPEAKERS.length]!
    const v = r.pick(t.v)
    queries.push({ type: 'two-turn', text: t.ask(who, v) })
    const s = anySession(who)
    const q = queries.length - 1
    insert(s, [
      { who: partner(s, who), text: t.q(who, v), mark: { q, both: true } },
      { who, text: t.a(v, r), mark: { q, both: true } },
    ])
  }
  // Speaker-attributed opinions: each topic discussed by several speakers across sessions.
  for (const topic of TOPICS) {
    const voices = r.sample(SPEAKERS, topic.opinions.length + 3)
    topic.opinions.forEach((op, j) => {
      const who = voices[j]!
      queries.push({
        type: 'speaker',
        text: r.pick([
          `what did ${who} say about ${topic.name}?`,
          `what does ${who} think of ${topic.name}?`,
          `how did ${who} feel about ${topic.name}?`,
        ]),
      })
      insert(anySession(who), [{ who, text: op, mark: { q: queries.length - 1 } }])
    })
    // Others mention the topic without an opinion of their own.
    for (const who of voices.slice(topic.opinions.length)) {
      insert(anySession(who), [
        {
          who,
          text: r.pick([
            `is anyone going to talk about ${topic.name} at the all-hands?`,
            `I missed ${topic.name}, fill me in later`,
            `${topic.name} came up again at lunch`,
          ]),
        },
      ])
    }
  }
  // Identifier pastes: one queried identifier each, plus as many pastes of the same shape without one.
  const used = new Set<string>()
  const fresh = (p: (typeof PASTES)[number]) => {
    for (;;) {
      const id = p.id(r)
      if (!used.has(id)) {
        used.add(id)
        return id
      }
    }
  }
  for (let i = 0; i < 66; i++) {
    const p = PASTES[i % PASTES.length]!
    for (const queried of [true, false]) {
      const lines = Array.from({ length: r.range(16, 34) }, () => p.line(r, fresh(p)))
      const s = anySession()
      const who = r.pick([s.a, s.b])
      if (!queried) {
        insert(s, [{ who, intro: p.intro, lines }])
        continue
      }
      const id = fresh(p)
      lines.splice(Math.floor(lines.length / 3) + r.int(Math.floor(lines.length / 3)), 0, p.line(r, id))
      queries.push({ type: 'identifier', text: p.ask(id, r) })
      insert(s, [{ who, intro: p.intro, lines, needle: { q: queries.length - 1, id } }])
    }
  }
  // Small talk around everything, so a session reads like a conversation.
  for (const s of sessions) {
    for (let n = r.range(8, 16); n > 0; n--) {
      const who = r.pick([s.a, s.b])
      insert(s, [{ who, text: r.pick(SMALL_TALK)(r, partner(s, who)) }])
    }
  }

  // Entries: a header per session, then each turn with the session's date; pastes split into passages.
  const passages: string[] = []
  const gold = new Map<number, number[]>()
  let turns = 0
  let pastes = 0
  sessions.forEach((s, i) => {
    const d = s.date
    const dateLong = `${['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'][d.getUTCDay()]}, ${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}`
    const stamp = `[${d.getUTCDate()} ${MON[d.getUTCMonth()]} ${d.getUTCFullYear()}]`
    passages.push(`Session ${i + 1} — ${dateLong} — ${s.a} and ${s.b}`)
    for (const item of s.items) {
      if ('text' in item) {
        turns++
        passages.push(`${stamp} ${item.who}: ${item.text}`)
        if (item.mark) gold.set(item.mark.q, [...(gold.get(item.mark.q) ?? []), passages.length - 1])
        continue
      }
      pastes++
      const parts = splitPassages(`${stamp} ${item.who}: ${item.intro}:\n${item.lines.join('\n')}`)
      const first = passages.length
      passages.push(...parts)
      if (item.needle) {
        const re = new RegExp(`(^|[\\s|])${item.needle.id.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}(?=[\\s|:]|$)`, 'm')
        const hits = parts.map((p, j) => (re.test(p) ? first + j : -1)).filter((j) => j >= 0)
        if (hits.length === 0) throw new Error(`identifier lost in splitting: ${item.needle.id}`)
        gold.set(item.needle.q, hits)
      }
    }
  })
  const seen = new Map<DialogueQueryType, number>()
  const out: DialogueQuery[] = queries.map((q, i) => {
    const k = seen.get(q.type) ?? 0
    seen.set(q.type, k + 1)
    const g = gold.get(i)
    if (!g?.length) throw new Error(`query without gold: ${q.text}`)
    return { ...q, gold: g, half: k % 2 === 0 ? 'tune' : 'held-out' }
  })
  return { passages, queries: out, stats: { sessions: sessions.length, turns, pastes, speakers: SPEAKERS.length } }
}
