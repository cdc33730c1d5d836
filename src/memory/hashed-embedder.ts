import type { Embedder } from '../core/memory-store.js'
import { analyze, stem, type Term } from './text-features.js'

export interface HashedEmbedderOptions {
  /** Vector length (default 384). */
  dimensions?: number
}

/**
 * The algorithm's version, part of `id`. Bump it whenever anything below changes a
 * vector (weights, hashing, the lexicon, or the tokeniser in text-features.ts), so
 * stored vectors of the old space are never compared with new ones.
 */
const VERSION = 1

/**
 * Feature weights, measured on a development paraphrase set (see the tests for the
 * held-out one). Identifiers count more than words (an exact `INV-2024-0042` is strong
 * evidence); pieces of identifiers, word pairs and character n-grams count less.
 */
const W = {
  word: 1,
  identifier: 1.5,
  part: 0.6,
  /** Adjacent term pairs (word order, phrases). */
  bigram: 0.5,
  /** All 3- and 4-grams of a word (with `<` `>` boundaries), shared out over the word's grams. */
  ngram: 0.4,
  /** A lexicon group a word belongs to (shared out when it is in several). */
  concept: 1.5,
}
/** Buckets each feature is added to (with independent signs): softens collisions. */
const PROBES = 2
const NGRAM_MIN = 3
const NGRAM_MAX = 4
/** Longer words (hashes, base64, run-together junk) get no n-grams: no word forms to match. */
const NGRAM_WORD_MAX = 40

const SEED_TERM = 0x9e3779b1
const SEED_BIGRAM = 0x85ebca6b
const SEED_NGRAM = 0xc2b2ae35
const SEED_CONCEPT = 0x51ed270b

/** A term's features, projected and cached across texts (bounded): sparse signed buckets. */
interface TermFeatures {
  hash: number
  buckets: Int32Array
  weights: Float64Array
}
const CACHE_LIMIT = 20_000

/**
 * The default offline embedder: signed feature hashing ("hashing trick") of normalised
 * words and identifiers, adjacent word pairs, character n-grams of each word (so word
 * forms and typos overlap) and lexicon concepts (so common synonyms meet), each weighted
 * 1 + ln(tf), projected into `dimensions` buckets and L2-normalised. Pure, deterministic
 * for its `id` (`hashed-v1-384`), no model and no network.
 */
export class HashedEmbedder implements Embedder {
  readonly id: string
  readonly dimensions: number
  private readonly cache = new Map<string, TermFeatures>()

  constructor(opts: HashedEmbedderOptions = {}) {
    const d = opts.dimensions ?? 384
    if (!Number.isInteger(d) || d < 8 || d > 65_536) throw new RangeError(`dimensions must be an integer from 8 to 65536 (got ${d})`)
    this.dimensions = d
    this.id = `hashed-v${VERSION}-${d}`
  }

  async embed(texts: readonly string[]): Promise<number[][]> {
    return texts.map((t) => this.embedOne(t))
  }

  /** One text's vector, synchronously. */
  embedOne(text: string): number[] {
    const d = this.dimensions
    const v = new Float64Array(d)
    // Distinct terms with their counts (sub-linear tf is applied per term).
    const counts = new Map<string, { f: TermFeatures; tf: number }>()
    let prev = -1
    for (const term of analyze(text)) {
      const key = term.kind === 'word' ? term.text : `${term.kind[0]}\u0000${term.text}`
      const seen = counts.get(key)
      const f = seen?.f ?? this.features(key, term)
      if (seen) seen.tf++
      else counts.set(key, { f, tf: 1 })
      if (term.kind === 'part') continue
      if (prev !== -1) project(v, mix((prev ^ SEED_BIGRAM) + Math.imul(f.hash, 31)), W.bigram)
      prev = f.hash
    }
    for (const { f, tf } of counts.values()) {
      const scale = 1 + Math.log(tf)
      for (let i = 0; i < f.buckets.length; i++) v[f.buckets[i]!]! += f.weights[i]! * scale
    }
    let norm = 0
    for (let i = 0; i < d; i++) norm += v[i]! * v[i]!
    const out = new Array<number>(d).fill(0)
    if (norm === 0) {
      // No features (empty, or only stopwords and punctuation): one fixed unit vector, so
      // all such texts are alike and nearly orthogonal to real content.
      out[mix(SEED_TERM) % d] = 1
      return out
    }
    norm = Math.sqrt(norm)
    for (let i = 0; i < d; i++) out[i] = v[i]! / norm
    return out
  }

  private features(key: string, term: Term): TermFeatures {
    let f = this.cache.get(key)
    if (f) return f
    f = termFeatures(term, this.dimensions)
    if (this.cache.size >= CACHE_LIMIT) this.cache.clear()
    this.cache.set(key, f)
    return f
  }
}

/** Adds a feature with weight `w` to `PROBES` buckets, each with its own sign. */
function project(v: Float64Array, h: number, w: number): void {
  let x = h
  for (let p = 0; p < PROBES; p++) {
    x = mix(x + p)
    v[(x >>> 1) % v.length]! += (x & 1) === 0 ? w : -w
  }
}

/** A term's features (itself, its concepts, its n-grams), projected into `d` signed buckets. */
function termFeatures(term: Term, d: number): TermFeatures {
  const v = new Float64Array(d)
  const hash = hashRange(term.text, 0, term.text.length, SEED_TERM)
  project(v, hash, term.kind === 'word' ? W.word : term.kind === 'identifier' ? W.identifier : W.part)
  const concepts = CONCEPTS.get(term.text)
  if (concepts) for (const c of concepts) project(v, c, W.concept / Math.sqrt(concepts.length))
  if (term.kind === 'word' && term.text.length <= NGRAM_WORD_MAX) {
    const s = `<${term.text}>`
    const grams: number[] = []
    for (let n = NGRAM_MIN; n <= NGRAM_MAX; n++) {
      for (let i = 0; i + n <= s.length; i++) grams.push(hashRange(s, i, i + n, SEED_NGRAM + n))
    }
    for (const g of grams) project(v, g, W.ngram / Math.sqrt(grams.length))
  }
  const buckets: number[] = []
  const weights: number[] = []
  v.forEach((x, i) => {
    if (x !== 0) {
      buckets.push(i)
      weights.push(x)
    }
  })
  return { hash, buckets: Int32Array.from(buckets), weights: Float64Array.from(weights) }
}

/** FNV-1a over UTF-16 code units of `s[from, to)`, from a seed. */
function hashRange(s: string, from: number, to: number, seed: number): number {
  let h = (0x811c9dc5 ^ seed) >>> 0
  for (let i = from; i < to; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return mix(h)
}

/** murmur3's 32-bit finaliser. */
function mix(h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

/**
 * Groups of words that often stand for one another (synonyms, closely related terms,
 * irregular forms), separated by `|` or new lines. Each member also emits its group's
 * feature, so paraphrases without a word in common still meet ("the invoice was paid
 * late" / "payment of the bill arrived after the due date"). General vocabulary of agent
 * memories: work, software, money, time, people, preferences. Members are stemmed here.
 */
const LEXICON = `
invoice bill billing receipt statement charge charged
pay paid payment payer settle settled remit remittance transfer
price cost costs fee fees pricing priced rate tariff expensive cheap afford charge quote
refund refunded reimburse reimbursement repay chargeback
subscription subscribe plan tier membership package license
cancel cancellation terminate unsubscribe discontinue stop | customer client buyer consumer user account shopper
purchase buy bought order ordered acquire checkout | sell sold sale sales revenue income earnings
budget allocate allocated allocation spend spent spending funds funding expense expenses
money dollar dollars euro euros usd eur cash currency pound | salary wage wages payroll compensation bonus
contract agreement deal | discount coupon promo voucher | tax taxes vat
debt owe owed overdue outstanding unpaid arrears
late later delayed delay overdue tardy behind postponed slipped | early ahead advance
postpone postponed reschedule rescheduled defer deferred delay push pushed
meeting call sync standup appointment session huddle conference
schedule scheduled plan planned calendar agenda timetable booked | deadline due cutoff | daily nightly everyday
weekly week fortnight | monthly month | yearly annual annually year | today tonight now currently
weekend saturday sunday | holiday holidays vacation leave trip break getaway | birthday born birth anniversary
deploy deployed deployment release released ship shipped rollout launch publish
error errors failure fail failed failing broken bug issue problem fault exception
crash crashed crashing panic abort died killed oom restart restarting exit
slow latency lag laggy sluggish performance speed | fast quick quickly rapid speedy
timeout timed hang hanging stuck unresponsive freeze frozen | server host machine instance box vm node
database db postgres postgresql mysql sql sqlite mongo mongodb
schema table tables migration migrations column columns | memory ram heap leak oom
disk storage space drive volume ssd full | cpu processor cores core load usage | log logs logging logged
backup backups snapshot snapshots copy archive restore | test tests testing spec suite
flaky intermittent intermittently sporadic unreliable random | ci pipeline build builds jenkins
config configuration configure settings setting setup options | install installation installer setup
password passphrase credentials login signin passcode pin | reset forgot forgotten recover recovery
account profile | delete remove removed erase wipe purge | update upgrade upgraded bump | version release
api endpoint route | limit limits throttle throttled throttling quota
container containers docker pod pods kubernetes k8s cluster | search searching query queries find lookup
network connection connect connectivity refused unreachable | security secure encryption encrypt encrypted
permission permissions access role roles | email emails mail inbox address | phone mobile telephone cell
address location street | file files document | docs documentation manual guide readme wiki
translate translation translations localize localise localization localisation i18n locale
language english spanish french german portuguese italian
code coding programming program develop developer engineer | editor edit editing ide vim neovim vscode emacs
linter lint eslint prettier formatter | fix fixed repair resolve resolved patch
owner owns own maintain maintains maintainer responsible | manager lead leads led head boss
ui interface frontend screen display | theme dark light mode appearance | webhook webhooks callback hook
signature hmac sign signed verify verification validate validation
notification notifications alert alerts notify | dog dogs puppy pup hound canine | cat cats kitten kitty feline
pet pets animal | name named called | allergy allergic allergies intolerance intolerant
nut nuts peanut peanuts almond | dairy milk lactose cheese cream
food eat eating meal meals dish cuisine recipe cook | drink beverage coffee tea
favourite favorite like likes love loves prefer preferred preference enjoy | hate dislike avoid | mother mom mum
father dad papa | sister brother sibling
family parent parents son daughter grandma grandpa wife husband partner
travel trip flight fly flying journey visit tour abroad | hotel booking reservation
home house apartment flat rent landlord | doctor health medical sick illness
metric kilometres kilometers kilograms metres meters celsius units unit
increase raise raised grow growing higher more bigger | reduce decrease cut lower shrink less smaller drop
big large huge | small tiny little | start begin began kick | help support assist | want need wish require
ask asked request requested | wrong incorrect | page pages site website | user users | team teams group
ship shipped shipment shipping package parcel delivery deliver delivered arrive arrived courier
job work career position employment employer employee hire hired hiring recruit recruiting
quit resign resigned resignation fired layoff laid | colleague coworker teammate peer | boss manager supervisor
company firm business organisation organization org startup agency employer | office workplace headquarters hq
interview candidate applicant | project initiative | task todo ticket chore assignment
goal goals objective objectives target targets okr okrs aim
priority priorities prioritise prioritize urgent important | review reviewed feedback critique
report summary overview | decision decide decided choose chose chosen choice pick picked
agree agreed approve approved approval accept accepted
reject rejected decline declined deny denied refuse refused | bug glitch defect regression
outage down downtime unavailable offline unreachable | website site homepage webpage
browser chrome firefox safari | link url href hyperlink | redirect redirects redirecting loop loops
upload uploads uploaded attach attachment attachments | download downloads downloaded
size limit max maximum cap | compile compiler compilation build | merge merged rebase rebased conflict conflicts
branch master trunk | commit commits | repo repository git github gitlab
secret secrets token tokens key keys credential credentials apikey | leak leaked exposed compromised breach
auth authentication authenticate signin login logout sso oauth okta
telemetry analytics tracking metrics usage reporting | monitor monitoring observability dashboard grafana
incident incidents outage pager oncall paging | gpu cuda nvidia graphics
train training trained inference model | cloud aws gcp azure | dns domain domains
queue queues broker kafka rabbitmq | cron job jobs scheduled | script scripts automation | parse parser parsing
json yaml toml csv xml | image images picture pictures photo photos screenshot | video videos clip recording
laptop notebook computer pc macbook | screen display monitor | phone smartphone iphone android
battery charger charging | wifi wireless internet | printer print printing
school class grade kindergarten teacher student university college
kid kids child children boy girl son daughter baby toddler | wife husband spouse partner girlfriend boyfriend
friend friends buddy pal | neighbour neighbor neighbours neighbors upstairs downstairs | noise noisy loud
quiet silent calm | apartment flat house home condo | move moving relocate relocating relocation
rent lease tenant landlord | insurance insurer claim claims policy coverage | accident collision crash
car vehicle auto truck | bike bicycle cycling | flight plane airline airport | passport visa
expire expires expired expiry expiration | renew renewal renewed extend
doctor physician gp dentist clinic hospital | medicine medication meds pill pills tablet prescription drug drugs
sick ill illness flu fever | pain hurt ache headache | sleep asleep nap insomnia | exercise workout gym fitness
jog jogging marathon | swim swimming pool | vegan vegetarian plant-based | meat beef chicken pork
grocery groceries supermarket shopping | breakfast lunch dinner supper brunch meal
restaurant cafe bistro diner | bake baking cook cooking recipe | music song songs band concert album playlist
movie movies film films cinema | book books novel novels reading | game games
learn learning study studying course lesson lessons tutorial | teach teaching tutor
weather rain snow sunny forecast temperature | gift gifts | party celebration celebrate
wedding marry married marriage | clock hour hours | open opens opening | close closes closing closed shut
weekday weekdays | soon shortly | recent recently lately | often frequently regularly usually
never rarely seldom | always constantly | bank wire transfer | card credit debit | free complimentary
loan mortgage | employee employees staff headcount people workforce personnel
message messages text chat dm slack | tell told inform informed | question questions inquire inquiry
answer answered reply replied respond response | complain complaint complained | happy glad pleased satisfied
sad unhappy upset disappointed | angry annoyed frustrated | worry worried concern concerned anxious
damage damaged crack cracked broke broken shatter shattered | lose lost missing | pause paused halt
disable disabled deactivate turnoff | enable enabled activate | replace replaced swap substitute rotate rotated
change changed modify modified alter | check inspect examine | wait waiting waited
`

const CONCEPTS: Map<string, number[]> = (() => {
  const m = new Map<string, number[]>()
  LEXICON.trim()
    .split(/\s*[|\n]\s*/)
    .forEach((line, g) => {
      const h = mix(SEED_CONCEPT + g)
      for (const word of new Set(
        line
          .trim()
          .split(/\s+/)
          .map((w) => stem(w)),
      )) {
        const list = m.get(word) ?? []
        if (!list.includes(h)) list.push(h)
        m.set(word, list)
      }
    })
  return m
})()
