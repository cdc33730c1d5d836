/**
 * Deterministic synthetic work-chat / tool-output corpora for the memory benchmarks.
 *
 * `recallCorpus()` builds a few thousand passages — short chat messages, long chat threads
 * and long tool outputs (ticket exports, ledgers, host logs, changelogs, transcripts, cloud
 * inventories, git logs), split with the service's own `splitPassages` — with planted facts
 * and the queries that look for them:
 *
 *  - `paraphrase`: the query names the fact in other words than the passage ("when did we
 *    settle the bill from Globex?" for "Invoice … from Globex was paid on …"). The entity in
 *    the query (vendor, service, team, person) recurs in many other passages, and the same
 *    frame recurs with other entities and other outcomes (hard negatives).
 *  - `identifier`: the query names an exact identifier (ticket id, invoice number, hostname,
 *    version, instance id, commit, person's full name) that sits on one line in the middle
 *    of a long output full of identifiers of the same shape.
 *
 * The texts were written as a person would phrase them (not from the embedder's lexicon);
 * the generator is seeded, so every run sees the same corpus.
 *
 * `shortTexts()` yields short one-to-three-sentence messages, for the HNSW scale benchmark.
 */
import { appImport } from './app.js'

const { splitPassages } = await appImport<typeof import('../../src/memory/passages.js')>('memory/passages.js')

// ---------------------------------------------------------------------------------------------
// PRNG

export class Rng {
  private s: number
  constructor(seed: number) {
    this.s = seed >>> 0
  }
  /** mulberry32: uniform in [0, 1). */
  next(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0
    let t = this.s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  int(n: number): number {
    return Math.floor(this.next() * n)
  }
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1)
  }
  pick<T>(a: readonly T[]): T {
    return a[this.int(a.length)]!
  }
  chance(p: number): boolean {
    return this.next() < p
  }
  shuffle<T>(a: T[]): T[] {
    for (let i = a.length - 1; i > 0; i--) {
      const j = this.int(i + 1)
      ;[a[i], a[j]] = [a[j]!, a[i]!]
    }
    return a
  }
  /** `n` distinct elements. */
  sample<T>(a: readonly T[], n: number): T[] {
    return this.shuffle([...a]).slice(0, n)
  }
}

// ---------------------------------------------------------------------------------------------
// Word lists

const FIRST = (
  'Dana Priya Tomás Mei Olusegun Ingrid Rafael Aiko Fatima Lukas Sofia Mateo Hannah Kwame Yuki Elena Omar Chloe Arjun Nadia ' +
  'Jonas Leila Diego Freya Kenji Amara Pavel Zoe Hiro Lucia Samir Greta Noah Ananya Felix Rosa Tariq Maja Ethan Ines ' +
  'Bruno Keiko Adaeze Marco Sara Viktor Nina Emeka Clara Rohan Julia Andrés Helga Wei Chiara Kofi Lena Ravi Ayla Max'
).split(' ')
const LAST = (
  'Ortiz Raman Silva Chen Adeyemi Larsen Costa Tanaka Haddad Becker Rossi Fernández Weber Mensah Sato Petrova Farouk Dubois ' +
  'Iyer Karimi Nilsson Moreau Alvarez Hansen Kobayashi Okafor Novak Martin Park Romano Aziz Schmidt Nguyen Kapoor Vogel Lopez ' +
  'Mahmoud Kowalski Brown Santos Meyer Ito Eze Ricci Berg Popescu Wagner Obi Gomez Shah Fischer Conti Ali Lindqvist Murphy Yamada'
).split(' ')
/** Surnames that appear only with the person an identifier query asks about (one person each). */
const RARE_LAST = (
  'Vandermeer Okonkwo Castellanos Brzezinski Thorvaldsen Achterberg Quintanilla Szymanska Lindgren-Holt Abernathy ' +
  'Mwangi-Otieno Featherstone Kowalczyk Rautenbach Ellingsworth Papadakis Ferreira-Lund Nakashima Oyelaran Valtonen Delacroix ' +
  'Grünewald Castiglione Hollingsworth Jaramillo Kristiansen Montgomery-Reyes Radcliffe Sandoval-Ruiz Takahashi-Berg'
).split(' ')

const VENDORS = [
  'Northwind Traders',
  'Globex',
  'Initech',
  'Umbrella Catering',
  'Stark Office Supply',
  'Hooli Cloud',
  'Vandelay Imports',
  'Soylent Foods',
  'Wayne Facilities',
  'Cyberdyne Hosting',
  'Tyrell Print',
  'Wonka Events',
  'Pied Piper Storage',
  'Aperture Labs',
  'Oceanic Freight',
  'Blue Sun Energy',
  'Monarch Legal',
  'Massive Dynamic',
  'Gekko Consulting',
  'Sterling Cooper',
  'Duff Beverages',
  'Prestige Worldwide',
  'Dunder Paper',
  'Bluth Construction',
  'Krusty Catering',
  'Nakatomi Security',
  'Omni Consumer Goods',
  'Rekall Travel',
]
const CUSTOMERS = [
  'Brightline Dental',
  'Keller & Sons',
  'Harbor Fitness',
  'Lumen Analytics',
  'Pinecrest Schools',
  'Redwood Clinics',
  'Atlas Movers',
  'Copperleaf Bakery',
  'Summit Realty',
  'Meridian Bank',
  'Falcon Couriers',
  'Greenfield Farms',
  'Orchid Spa',
  'Quarry Labs',
  'Riverside Hotel',
  'Silverline Motors',
  'Tidewater Shipping',
  'Union Robotics',
  'Vista Opticians',
  'Willow Pharmacy',
  'Yellowstone Outfitters',
  'Zenith Insurance',
  'Beacon Legal',
  'Cedar Grove Vets',
  'Driftwood Studios',
  'Ember Games',
  'Fjord Seafood',
  'Granite Partners',
  'Helios Solar',
  'Ironclad Storage',
]
const SERVICES = [
  'checkout-api',
  'auth-service',
  'billing-worker',
  'search-indexer',
  'notification-hub',
  'payments-gateway',
  'media-transcoder',
  'inventory-sync',
  'report-builder',
  'session-broker',
  'pricing-engine',
  'email-relay',
  'user-profile',
  'feature-flags',
  'audit-log',
  'geo-lookup',
  'ledger-service',
  'image-resizer',
  'webhook-dispatcher',
  'export-worker',
]
const TEAMS = [
  'platform',
  'growth',
  'data',
  'mobile',
  'payments',
  'infra',
  'support',
  'design',
  'security',
  'finance',
  'marketing',
  'sales ops',
]
const CITIES = [
  'Lisbon',
  'Berlin',
  'Toronto',
  'Singapore',
  'Austin',
  'Nairobi',
  'Osaka',
  'Krakow',
  'Denver',
  'Melbourne',
  'Dublin',
  'Seoul',
  'Oslo',
  'Mexico City',
  'Cape Town',
  'Chicago',
  'Madrid',
  'Bangalore',
  'Vancouver',
  'Amsterdam',
]
const MODULES = [
  'the rate limiter',
  'the webhook dispatcher',
  'the CSV exporter',
  'the session cache',
  'the search ranking code',
  'the upload pipeline',
  'the feature-flag client',
  'the PDF renderer',
  'the auth middleware',
  'the migration runner',
  'the billing reconciler',
  'the retry queue',
  'the permissions model',
  'the notification scheduler',
  'the image cropper',
]
const LIBS = [
  'react',
  'express',
  'lodash',
  'axios',
  'postgres-driver',
  'redis-client',
  'protobuf',
  'openssl',
  'grpc',
  'webpack',
  'typescript',
  'jest',
  'fastify',
  'pino',
  'zod',
  'prisma',
  'kafka-client',
  'sharp',
  'nginx',
  'terraform',
]
const TOPICS = [
  'the pricing page redesign',
  'on-call rotation changes',
  'the data retention policy',
  'the hiring plan',
  'the Kubernetes upgrade',
  'quarterly OKRs',
  'the mobile release train',
  'vendor consolidation',
  'SOC 2 audit prep',
  'the onboarding flow',
  'database sharding',
  'the partner API',
  'accessibility fixes',
  'the latency budget',
  'the EU data residency work',
  'the support macros',
  'the dashboard rewrite',
  'cost cutting on cloud spend',
  'the referral program',
  'the status page',
]
const DAYS = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday']
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December']
const ROOMS = ['Juniper', 'Atlas', 'Fjord', 'Harbor', 'Summit', 'Lagoon']
const ITEMS = [
  'the conference booth',
  'twelve laptops',
  'the office move',
  'catering for the offsite',
  'annual licences',
  'the printer lease',
  'cloud storage overage',
  'legal review hours',
  'security guards for the launch',
  'the team shirts',
]
const STATUSES = ['open', 'pending', 'in progress', 'waiting on customer', 'escalated', 'resolved', 'closed']
const TICKET_SUBJECTS = [
  'cannot reset password',
  'charged twice this month',
  'export stuck at 99%',
  'SSO setup question',
  'invoice address wrong',
  'slow dashboard',
  'API returns 429',
  'missing emails',
  'cannot invite teammates',
  'mobile app crash on login',
  'data import failed',
  'wants annual billing',
  'refund request',
  'locale shows wrong currency',
  'webhook signature mismatch',
  'report totals do not add up',
  'account locked',
  'cannot delete project',
  'audit log export',
  'custom domain not verifying',
]

const pad = (n: number, w: number) => String(n).padStart(w, '0')
const money = (r: Rng) => `${r.pick(['$', '€', '£'])}${r.range(2, 480) * 100 + r.pick([0, 50, 25, 99])}`.replace(/(\d)(?=(\d{3})+$)/, '$1,')
const date = (r: Rng) => `${r.pick(MONTHS)} ${r.range(1, 28)}`
const time = (r: Rng) => `${r.range(7, 20)}:${pad(r.pick([0, 5, 10, 15, 20, 30, 40, 45, 50]), 2)}`
const ver = (r: Rng) => `${r.range(1, 9)}.${r.range(0, 30)}.${r.range(0, 20)}`

// ---------------------------------------------------------------------------------------------
// Filler sentences by domain (what most of the corpus is made of)

interface Ctx {
  person: () => string
  r: Rng
}
type Filler = (c: Ctx) => string

const FILLER: Record<string, Filler[]> = {
  meetings: [
    ({ r, person }) =>
      `Notes from the ${r.pick(TEAMS)} sync: ${person()} walked through the Q${r.range(1, 4)} roadmap and we agreed to revisit ${r.pick(TOPICS)} next week.`,
    ({ r, person }) => `${person()} will send the agenda for ${r.pick(DAYS)}'s planning session by end of day.`,
    ({ r, person }) => `Action item for ${person()}: draft a one-pager on ${r.pick(TOPICS)} before ${r.pick(DAYS)}.`,
    ({ r }) => `We ran out of time before discussing ${r.pick(TOPICS)}; it goes first on the next agenda.`,
    ({ r, person }) =>
      `${person()} and ${person()} disagreed about ${r.pick(TOPICS)}; ${person()} will make the call after looking at the numbers.`,
    ({ r }) => `Reminder: the all-hands is on ${r.pick(DAYS)} at ${time(r)} in the ${r.pick(ROOMS)} room, remote folks use the usual link.`,
    ({ r }) => `Retro takeaways: fewer status meetings, a clear owner for ${r.pick(TOPICS)}, and decisions written down in the team doc.`,
    ({ r, person }) =>
      `${person()} is presenting the results of ${r.pick(TOPICS)} at the ${r.pick(TEAMS)} review, slides are in the shared folder.`,
    ({ r }) => `Can someone take notes in the ${r.pick(ROOMS)} room today? The usual note-taker is out.`,
    ({ r }) => `The ${r.pick(TEAMS)} weekly sync was cancelled this week, async updates in the channel instead.`,
    ({ r }) => `Agenda for the ${r.pick(TEAMS)} sync: hiring, ${r.pick(TOPICS)}, and open incidents.`,
  ],
  deployments: [
    ({ r }) => `Deploying ${r.pick(SERVICES)} ${ver(r)} to staging now, ping me if the smoke tests look off.`,
    ({ r }) => `${r.pick(SERVICES)} ${ver(r)} is rolling out to ${r.pick([5, 10, 25, 50])}% of traffic.`,
    ({ r }) => `Rolled back ${r.pick(SERVICES)} ${ver(r)} after the error rate climbed to ${r.range(2, 9)}%.`,
    ({ r }) =>
      `Pipeline for ${r.pick(SERVICES)} failed at the integration stage: the ${r.pick(['checkout', 'login', 'refund', 'export'])} test timed out.`,
    ({ r }) => `Canary for ${r.pick(SERVICES)} looks clean after ${r.range(10, 45)} minutes, promoting to the next stage.`,
    ({ r }) =>
      `Feature flag ${r.pick(['new-checkout', 'dark-mode', 'bulk-export', 'smart-search', 'v2-onboarding'])} enabled for internal users only.`,
    ({ r }) => `Pinned ${r.pick(LIBS)} to ${ver(r)} until the upstream fix lands.`,
    ({ r }) => `${r.pick(SERVICES)} ${ver(r)} deployment to staging failed on the database migration, investigating.`,
    ({ r }) => `${r.pick(SERVICES)} ${ver(r)} is waiting for QA sign-off before it can go anywhere.`,
    ({ r }) => `Build cache for ${r.pick(SERVICES)} was corrupted, a clean build takes ${r.range(8, 25)} minutes.`,
    ({ r }) => `Freeze starts ${r.pick(DAYS)}: no production changes without a second approver.`,
  ],
  invoices: [
    ({ r, person }) =>
      `Invoice INV-${r.range(2023, 2026)}-${pad(r.range(1, 99999), 5)} from ${r.pick(VENDORS)} for ${money(r)} received and routed to ${person()} for approval.`,
    ({ r }) => `${r.pick(VENDORS)} sent a revised quote: ${money(r)} for the annual plan, down from last year.`,
    ({ r }) => `Finance flagged the ${r.pick(VENDORS)} invoice because the PO number is missing.`,
    ({ r }) => `The ${r.pick(VENDORS)} invoice is disputed: we were charged twice for ${r.pick(ITEMS)}.`,
    ({ r, person }) => `Expense report from ${person()} for ${money(r)} approved, reimbursement with the next payroll.`,
    ({ r }) => `Payment run scheduled for ${r.pick(DAYS)}: ${r.range(8, 60)} invoices, ${money(r)} in total.`,
    ({ r }) => `${r.pick(VENDORS)} sent a reminder that their invoice from ${r.pick(MONTHS)} is overdue.`,
    ({ r }) => `Invoice from ${r.pick(VENDORS)} for ${r.pick(ITEMS)} is still waiting for budget approval.`,
    ({ r }) => `${r.pick(VENDORS)} invoice received and logged, due in ${r.pick([15, 30, 45, 60])} days.`,
    ({ r }) => `Price increase from ${r.pick(VENDORS)} next year: ${r.range(3, 15)}% on the base plan.`,
    ({ r }) => `The ${r.pick(VENDORS)} contract was sent to legal for redlines.`,
  ],
  support: [
    ({ r }) => `Ticket from ${r.pick(CUSTOMERS)}: ${r.pick(TICKET_SUBJECTS)}. Priority P${r.range(1, 4)}.`,
    ({ r }) =>
      `${r.pick(CUSTOMERS)} asked whether ${r.pick(['SSO', 'audit logs', 'bulk export', 'custom roles', 'the API'])} is available on the starter plan.`,
    ({ r }) => `Escalated the ${r.pick(CUSTOMERS)} case to engineering, it looks like a regression from last week's release.`,
    ({ r }) => `Replied to ${r.pick(CUSTOMERS)} with the workaround for ${r.pick(TICKET_SUBJECTS)}.`,
    ({ r }) => `Closed the ${r.pick(CUSTOMERS)} ticket after they confirmed the fix works.`,
    ({ r }) => `${r.pick(CUSTOMERS)} renewal is at risk, their main contact left the company.`,
    ({ r }) => `Demo for ${r.pick(CUSTOMERS)} went well; they want SSO and audit logs before signing.`,
    ({ r, person }) => `${person()} is covering the support queue this afternoon, ${r.range(4, 30)} tickets waiting.`,
    ({ r }) => `CSAT for ${r.pick(MONTHS)} was ${r.range(78, 97)}%, the lowest scores were about response time.`,
  ],
  reviews: [
    ({ r, person }) => `${person()} approved PR #${r.range(1000, 9999)} (${r.pick(MODULES)} refactor) with two nits.`,
    ({ r }) => `Left comments on #${r.range(1000, 9999)}: the tests for ${r.pick(MODULES)} mock too much to be useful.`,
    ({ r }) => `PR #${r.range(1000, 9999)} is blocked on CI, the lint step fails on unused imports.`,
    ({ r, person }) => `${person()} suggested splitting the ${r.pick(MODULES)} change into smaller PRs.`,
    ({ r }) => `Merged the fix for the off-by-one in ${r.pick(MODULES)}.`,
    ({ r, person }) => `${person()} merged the ${r.pick(MODULES)} PR after the second round of review.`,
    ({ r }) => `Who owns ${r.pick(MODULES)}? The CODEOWNERS file points at a team that no longer exists.`,
    ({ r, person }) => `${person()} is pairing on ${r.pick(MODULES)} today, reviews might be slow.`,
  ],
  travel: [
    ({ r, person }) => `${person()} booked a hotel near the ${r.pick(CITIES)} office for ${r.pick(DAYS)} to ${r.pick(DAYS)}.`,
    ({ r }) => `Train tickets for the ${r.pick(CITIES)} trip are in the shared drive.`,
    ({ r, person }) => `${person()}'s visa appointment for the ${r.pick(CITIES)} trip is on ${date(r)}.`,
    ({ r }) => `Per diem for ${r.pick(CITIES)} is ${money(r)} a day, keep the receipts.`,
    ({ r }) => `The offsite in ${r.pick(CITIES)} is moving to the second week of ${r.pick(MONTHS)}.`,
    ({ r, person }) => `${person()}'s trip to ${r.pick(CITIES)} was approved by finance.`,
    ({ r, person }) => `${person()} is back from ${r.pick(CITIES)} and catching up on email.`,
    ({ r }) => `Travel policy reminder: economy for flights under six hours, book through the portal.`,
  ],
  incidents: [
    ({ r }) => `Alert: p99 latency on ${r.pick(SERVICES)} above ${r.range(300, 2000)} ms for 10 minutes.`,
    ({ r, person }) => `Paged ${person()} for ${r.pick(SERVICES)} disk usage at ${r.range(85, 99)}%.`,
    ({ r }) => `Incident on ${r.pick(SERVICES)} resolved after restarting the workers; monitoring for another hour.`,
    ({ r }) => `Postmortem for the ${r.pick(SERVICES)} incident is scheduled for ${r.pick(DAYS)}.`,
    ({ r, person }) => `${person()} is incident commander for the ${r.pick(SERVICES)} degradation, updates every 30 minutes.`,
    ({ r }) => `Status page updated: ${r.pick(SERVICES)} is operating normally again.`,
    ({ r }) => `Error budget for ${r.pick(SERVICES)} is ${r.range(10, 90)}% spent this month.`,
  ],
  people: [
    ({ r, person }) => `${person()} prefers async updates in the channel over calls.`,
    ({ r, person }) => `${person()} is on parental leave until ${r.pick(MONTHS)}.`,
    ({ r, person }) => `${person()} moved to the ${r.pick(TEAMS)} team last month.`,
    ({ r, person }) => `${person()} works from the ${r.pick(CITIES)} office on ${r.pick(DAYS)}s.`,
    ({ r, person }) => `Interview loop for ${person()} on ${r.pick(DAYS)}: system design, coding and a values interview.`,
    ({ r, person }) => `References for ${person()} came back positive.`,
    ({ r, person }) => `${person()} is out sick today, the ${r.pick(TEAMS)} standup is cancelled.`,
    ({ r }) => `Referral bonus raised to ${money(r)} for engineering roles.`,
    ({ r, person }) => `${person()} asked for a standing desk and a second monitor.`,
  ],
  budget: [
    ({ r }) => `The ${r.pick(TEAMS)} team is ${r.range(3, 18)}% over its software budget this quarter.`,
    ({ r }) => `Cloud spend for ${r.pick(MONTHS)} came in at ${money(r)}, mostly storage and egress.`,
    ({ r, person }) => `${person()} is preparing the budget request for the ${r.pick(TEAMS)} team, draft due ${r.pick(DAYS)}.`,
    ({ r }) => `Headcount for the ${r.pick(TEAMS)} team is frozen until the board meeting.`,
  ],
}
const DOMAINS = Object.keys(FILLER)

// ---------------------------------------------------------------------------------------------
// Paraphrase facts: a frame with an entity; the planted fact is the frame's target outcome for one
// entity (that combination appears nowhere else), negatives are other outcomes / other entities.

interface ParaphraseType {
  kind: string
  domain: string
  entities: readonly string[]
  /** The target outcome, as it is written in a passage (several surface forms). */
  fact: (r: Rng, e: string) => string
  /** Questions a person would ask about it, in other words. */
  ask: (r: Rng, e: string) => string
  /** Other outcomes of the same frame (used for any entity, also the planted one). */
  negative: (r: Rng, e: string) => string
}

const PARAPHRASE: ParaphraseType[] = [
  {
    kind: 'invoice paid',
    domain: 'invoices',
    entities: VENDORS,
    fact: (r, e) =>
      r.pick([
        `Invoice INV-${r.range(2023, 2026)}-${pad(r.range(1, 99999), 5)} from ${e} was paid on ${date(r)} by bank transfer.`,
        `Finance confirmed the ${e} invoice has been paid in full.`,
        `${e}: payment for their ${r.pick(MONTHS)} invoice went out on ${date(r)}.`,
      ]),
    ask: (r, e) =>
      r.pick([
        `when did we settle the bill from ${e}?`,
        `has ${e} received their money yet?`,
        `did the ${e} charges get covered?`,
        `is ${e} squared away financially?`,
      ]),
    negative: (r, e) =>
      r.pick([
        `Invoice from ${e} is still awaiting approval from the budget owner.`,
        `The ${e} invoice was disputed over a duplicate line item.`,
        `${e} sent a reminder that an invoice is overdue.`,
        `New invoice from ${e} received and logged.`,
      ]),
  },
  {
    kind: 'deployed to production',
    domain: 'deployments',
    entities: SERVICES,
    fact: (r, e) =>
      r.pick([
        `${e} ${ver(r)} was deployed to production at ${time(r)} and the canary is healthy.`,
        `Shipped ${e} ${ver(r)} to prod this morning, all pods updated.`,
        `Production rollout of ${e} ${ver(r)} finished without errors.`,
      ]),
    ask: (r, e) =>
      r.pick([
        `when did the latest ${e} release go live?`,
        `is the new version of ${e} out for customers?`,
        `which build of ${e} are users running now?`,
      ]),
    negative: (r, e) =>
      r.pick([
        `${e} ${ver(r)} deployment to staging failed on migrations.`,
        `Rolled back ${e} ${ver(r)} after a spike in 500s.`,
        `${e} ${ver(r)} is waiting for QA sign-off.`,
        `Opened a PR to bump ${e} dependencies.`,
      ]),
  },
  {
    kind: 'meeting moved',
    domain: 'meetings',
    entities: TEAMS,
    fact: (r, e) =>
      r.pick([
        `The ${e} weekly sync is moving from Tuesday to Thursday at 3pm, starting next week.`,
        `Heads up: the ${e} standup now happens at 9:45 instead of 9:30.`,
        `We rescheduled the recurring ${e} planning meeting to Friday mornings because of the holiday calendar.`,
      ]),
    ask: (r, e) =>
      r.pick([
        `what day does the ${e} team get together now?`,
        `did the ${e} recurring call change time?`,
        `when is the ${e} group's regular check-in these days?`,
      ]),
    negative: (r, e) =>
      r.pick([
        `The ${e} weekly sync was cancelled this week.`,
        `Notes from the ${e} weekly sync are in the wiki.`,
        `Agenda for the ${e} sync: hiring, roadmap, incidents.`,
      ]),
  },
  {
    kind: 'flight arrival',
    domain: 'travel',
    entities: [],
    fact: (r, e) => {
      const [p, city] = e.split('|') as [string, string]
      return r.pick([
        `${p}'s flight to ${city} lands at ${time(r)} on ${r.pick(DAYS)}.`,
        `${p} arrives in ${city} on the ${time(r)} train ${r.pick(DAYS)}.`,
        `${p} lands in ${city} ${r.pick(DAYS)} evening, flight ${r.pick(['LH', 'BA', 'KL', 'UA', 'TP'])}${r.range(100, 999)}.`,
      ])
    },
    ask: (r, e) => {
      const [p, city] = e.split('|') as [string, string]
      return r.pick([`what time does ${p} get to ${city}?`, `when is ${p} due in ${city}?`, `when will ${p} reach ${city}?`])
    },
    negative: (r, e) => {
      const [p, city] = e.split('|') as [string, string]
      return r.pick([
        `${p} booked a hotel in ${city}.`,
        `${p}'s trip to ${city} was approved.`,
        `${p} is back from ${city}.`,
        `${p} wants restaurant tips for ${city}.`,
      ])
    },
  },
  {
    kind: 'review requested changes',
    domain: 'reviews',
    entities: [],
    fact: (r, e) => {
      const [p, m] = e.split('|') as [string, string]
      return r.pick([
        `${p} blocked the PR for ${m} until the retry logic uses exponential backoff.`,
        `Review from ${p} on ${m}: the hard-coded timeouts need to move into config before it can merge.`,
        `${p} won't approve ${m} without tests for the error paths.`,
      ])
    },
    ask: (r, e) => {
      const [p, mod] = e.split('|') as [string, string]
      const m = mod.replace(/^the /, '')
      return r.pick([
        `what does ${p} want fixed in the ${m} before signing off?`,
        `why is ${p} holding up the ${m} change?`,
        `what did ${p} object to in the ${m} pull request?`,
      ])
    },
    negative: (r, e) => {
      const [p, m] = e.split('|') as [string, string]
      return r.pick([`${p} approved the PR for ${m}.`, `${p} merged ${m} after CI went green.`, `${p} is reviewing ${m} tomorrow.`])
    },
  },
  {
    kind: 'dietary preference',
    domain: 'people',
    entities: [],
    fact: (r, e) =>
      r.pick([
        `${e} doesn't eat meat or dairy, so pick a place with vegan options.`,
        `Note for team events: ${e} has a severe peanut allergy.`,
        `${e} keeps kosher, order from the certified caterer.`,
        `${e} avoids gluten, coeliac.`,
      ]),
    ask: (r, e) =>
      r.pick([
        `any food restrictions for ${e} at the team dinner?`,
        `what should we keep in mind about ${e} when ordering lunch?`,
        `what can't ${e} have at the offsite meal?`,
      ]),
    negative: (r, e) =>
      r.pick([
        `${e} prefers async updates over calls.`,
        `${e} is on the ${r.pick(TEAMS)} team.`,
        `${e} asked for a second monitor.`,
        `${e} is out on ${r.pick(DAYS)}.`,
      ]),
  },
  {
    kind: 'contract renewal',
    domain: 'invoices',
    entities: VENDORS,
    fact: (r, e) =>
      r.pick([
        `The ${e} agreement auto-renews on ${date(r)} unless we give 60 days' notice.`,
        `${e} contract term ends ${date(r)}; it rolls over for another year if we do nothing.`,
      ]),
    ask: (r, e) =>
      r.pick([
        `what's the deadline to cancel with ${e}?`,
        `when does our deal with ${e} expire?`,
        `by when do we need to tell ${e} we're leaving?`,
      ]),
    negative: (r, e) =>
      r.pick([`The ${e} contract was signed by legal.`, `The ${e} contract went out for redlines.`, `Price increase from ${e} next year.`]),
  },
  {
    kind: 'new hire start',
    domain: 'people',
    entities: [],
    fact: (r, e) =>
      r.pick([
        `${e} accepted our offer and starts on ${date(r)} as a backend engineer.`,
        `${e} signed the offer letter; first day is ${date(r)}.`,
      ]),
    ask: (r, e) => r.pick([`when does ${e} begin working with us?`, `when is ${e} coming on board?`, `what's ${e}'s joining date?`]),
    negative: (r, e) =>
      r.pick([
        `Interview loop for ${e} on ${r.pick(DAYS)}.`,
        `References for ${e} came back positive.`,
        `${e} asked for more time to decide.`,
        `Feedback on ${e}: strong on systems, weaker on communication.`,
      ]),
  },
  {
    kind: 'outage cause',
    domain: 'incidents',
    entities: SERVICES,
    fact: (r, e) =>
      r.pick([
        `Root cause for the ${e} outage: the connection pool was exhausted after a config change.`,
        `${e} went down because its TLS certificate expired overnight.`,
        `The ${e} incident was caused by a bad migration that locked the orders table.`,
        `${e} fell over when the disk filled up with debug logs.`,
      ]),
    ask: (r, e) => r.pick([`why did ${e} stop working?`, `what broke ${e} last week?`, `what was behind the ${e} downtime?`]),
    negative: (r, e) =>
      r.pick([
        `Alert: ${e} latency above 800 ms.`,
        `Incident on ${e} resolved.`,
        `Postmortem for ${e} scheduled for ${r.pick(DAYS)}.`,
        `${e} error budget is half spent.`,
      ]),
  },
  {
    kind: 'budget approved',
    domain: 'budget',
    entities: TEAMS,
    fact: (r, e) =>
      r.pick([
        `Budget for the ${e} team in Q${r.range(1, 4)} was approved at ${money(r)}.`,
        `Finance signed off on ${money(r)} of spending for ${e} next quarter.`,
      ]),
    ask: (r, e) =>
      r.pick([
        `how much money can ${e} spend next quarter?`,
        `what did the ${e} group get allocated?`,
        `how big is the ${e} allowance for the coming months?`,
      ]),
    negative: (r, e) =>
      r.pick([`The ${e} team is over its software budget.`, `Headcount for ${e} is frozen.`, `The ${e} budget request is still a draft.`]),
  },
  {
    kind: 'equipment replaced',
    domain: 'people',
    entities: [],
    fact: (r, e) =>
      r.pick([
        `${e}'s laptop died; IT is shipping a replacement that should arrive ${r.pick(DAYS)}.`,
        `Ordered a new MacBook for ${e}, the old one has a cracked screen.`,
      ]),
    ask: (r, e) =>
      r.pick([
        `when will ${e} get a new computer?`,
        `is ${e}'s broken notebook being swapped out?`,
        `what's happening with ${e}'s machine?`,
      ]),
    negative: (r, e) => r.pick([`${e} asked for a standing desk.`, `${e} moved desks to the third floor.`, `${e} needs VPN access.`]),
  },
]

/** Customer complaints: a unique problem each, asked for without naming the customer. */
const COMPLAINTS: Array<[passage: string, query: string]> = [
  ['exported CSV files are missing the header row', 'spreadsheet downloads come without column names'],
  ['the mobile app logs them out every few minutes', 'the phone application keeps ending their session'],
  ['password reset emails arrive hours late', 'account recovery messages take forever to show up'],
  ['invoices show the wrong VAT rate', 'the tax percentage on their bills is incorrect'],
  ['dashboard charts render blank in Safari', 'graphs are empty on Apple’s browser'],
  ['search returns results from archived projects', 'lookups surface stuff from old closed workspaces'],
  ['webhooks fire twice for every order', 'they get duplicate callbacks per purchase'],
  ['uploads over 2 GB fail silently', 'large file transfers break without any error message'],
  ['the calendar integration shows meetings in UTC', 'events synced from their agenda have the wrong timezone'],
  ['two-factor codes are rejected as expired', 'their 2FA tokens are not accepted'],
  ['PDF reports cut off the last page', 'printable summaries are missing the final sheet'],
  ['SSO login loops back to the sign-in page', 'single sign-on keeps redirecting them endlessly'],
  ['bulk user import drops everyone with an accent in their name', 'people with diacritics vanish when adding staff from a file'],
  ['the monthly usage email counts deleted seats', 'removed licences still show up in the consumption summary'],
  ['dark mode makes the error text unreadable', 'warnings are invisible with the night theme'],
  ['API pagination skips records when items are added', 'listing endpoints miss entries if new data arrives while paging'],
  ['scheduled reports go out an hour early since the clock change', 'automated summaries arrive sixty minutes ahead after daylight saving'],
  ['the Android app drains the battery overnight', 'their phones run out of charge because of our app in the background'],
  ['refunds take three weeks to reach the card', 'money back is very slow to land on their credit statement'],
  ['the audit log does not record permission changes', 'role edits are not tracked in the activity history'],
]

// ---------------------------------------------------------------------------------------------
// Identifier facts: one line with the identifier in the middle of a long output of same-shape lines.

interface IdentifierType {
  kind: string
  /** A fresh identifier (the generator keeps queried ones unique). */
  id: (r: Rng) => string
  /** One line of the output, about `id`. */
  line: (r: Rng, id: string, c: Ctx) => string
  header: (r: Rng) => string
  ask: (r: Rng, id: string) => string
}

const HEX = '0123456789abcdef'
const hex = (r: Rng, n: number) => Array.from({ length: n }, () => HEX[r.int(16)]).join('')

const IDENTIFIER: IdentifierType[] = [
  {
    kind: 'ticket id',
    // A narrow range: every export is full of near-duplicates (SUP-48213 vs SUP-48231, SUP-48312…).
    id: (r) => `SUP-${r.range(48000, 48999)}`,
    header: (r) =>
      `Export of the support queue (${r.pick(['open', 'all', 'escalated'])} tickets), ${date(r)}:\nid | status | priority | subject | assignee`,
    line: (r, id, c) =>
      `${id} | ${r.pick(STATUSES)} | P${r.range(1, 4)} | ${r.pick(TICKET_SUBJECTS)} (${r.pick(CUSTOMERS)}) | ${c.person()}`,
    ask: (r, id) => r.pick([id, `what's the status of ${id}?`, `who is handling ticket ${id}`, `details on ${id} please`]),
  },
  {
    kind: 'invoice number',
    id: (r) => `INV-2024-${pad(r.range(800, 1299), 5)}`,
    header: (r) => `Accounts payable ledger, ${r.pick(MONTHS)} close:\ninvoice | vendor | amount | status | due`,
    line: (r, id) =>
      `${id} | ${r.pick(VENDORS)} | ${money(r)} | ${r.pick(['paid', 'approved', 'pending approval', 'disputed', 'scheduled'])} | due ${date(r)}`,
    ask: (r, id) => r.pick([id, `amount on invoice ${id}`, `is ${id} paid?`, `which vendor sent ${id}?`]),
  },
  {
    kind: 'hostname',
    id: (r) =>
      `${r.pick(['api', 'web', 'db', 'cache', 'worker', 'queue'])}-${r.pick(['prod', 'stg'])}-${pad(r.range(1, 40), 2)}.${r.pick(['eu-west-1', 'eu-central-1', 'us-east-1', 'us-east-2', 'us-west-2', 'ap-southeast-1'])}.internal`,
    header: (r) => `Aggregated logs for ${r.pick(SERVICES)}, last ${r.range(15, 60)} minutes:`,
    line: (r, id) =>
      `2026-${pad(r.range(1, 12), 2)}-${pad(r.range(1, 28), 2)}T${pad(r.range(0, 23), 2)}:${pad(r.range(0, 59), 2)}:${pad(r.range(0, 59), 2)}Z ${id} ${r.pick(SERVICES)}[${r.range(100, 9999)}]: ${r.pick(['health check ok', 'GC pause 180ms', 'connection reset by peer', 'upstream timeout after 30000ms', 'pulled image and restarted', 'disk usage 91%', 'TLS handshake failed', 'retrying job 3/5', 'OOMKilled, restarting', 'config reloaded'])}`,
    ask: (r, id) => r.pick([id, `errors on ${id}`, `what happened on host ${id}?`, `logs from ${id}`]),
  },
  {
    kind: 'version',
    id: (r) => (r.chance(0.3) ? `${ver(r)}-rc.${r.range(1, 5)}` : ver(r)),
    header: (r) => r.pick(['Dependency updates merged this sprint:', 'Release notes digest:', `Renovate summary for ${r.pick(SERVICES)}:`]),
    line: (r, id) =>
      r.pick([
        `- bumped ${r.pick(LIBS)} to ${id} (${r.pick(['security fix', 'perf improvements', 'breaking: drops Node 16', 'bug fixes', 'new streaming API'])})`,
        `- ${r.pick(LIBS)} ${id}: ${r.pick(['fixes a memory leak in the pool', 'changes the default timeout', 'adds ESM exports', 'deprecates the old config format', 'patches CVE in the parser'])}`,
      ]),
    ask: (r, id) => r.pick([id, `what changed in ${id}?`, `which package went to ${id}?`, `release notes for ${id}`]),
  },
  {
    kind: 'instance id',
    id: (r) => `i-0${hex(r, 16)}`,
    header: (r) =>
      `Cloud inventory (${r.pick(['us-east-1', 'eu-west-1', 'ap-southeast-1'])}), instances tagged env=${r.pick(['prod', 'staging'])}:`,
    line: (r, id, c) =>
      `${id}  ${r.pick(['t3.large', 'm5.xlarge', 'c6g.2xlarge', 'r5.large', 'm6i.4xlarge'])}  ${r.pick(['running', 'stopped', 'running', 'running'])}  service=${r.pick(SERVICES)} owner=${c.person().split(' ')[0]!.toLowerCase()}`,
    ask: (r, id) => r.pick([id, `who owns instance ${id}?`, `what runs on ${id}`, `instance type of ${id}`]),
  },
  {
    kind: 'commit',
    id: (r) => hex(r, 7),
    header: (r) => `git log --oneline ${r.pick(['main', 'release/2026.3', 'develop'])} (${r.pick(SERVICES)}):`,
    line: (r, id, c) =>
      `${id} ${r.pick(['Fix', 'Add', 'Refactor', 'Remove', 'Speed up', 'Handle'])} ${r.pick(['retry in', 'logging in', 'null check in', 'types for', 'tests for', 'timeouts in'])} ${r.pick(MODULES).replace(/^the /, '')} (${c.person()})`,
    ask: (r, id) => r.pick([id, `what did commit ${id} do?`, `who wrote ${id}?`]),
  },
  {
    kind: "person's name",
    id: () => '', // names are made by the generator (a rare surname each)
    header: (r) => r.pick([`Transcript, ${r.pick(TEAMS)} planning, ${date(r)}:`, `On-call handover notes, week ${r.range(1, 52)}:`]),
    line: (r, id) =>
      `${id}: ${r.pick(['I can take the migration if someone covers my reviews.', 'the numbers from last week look off to me.', 'let us push that to next sprint.', 'I talked to the customer, they are fine with a workaround.', 'I will be out Thursday and Friday.', 'can we get a second pair of eyes on the alert thresholds?', 'the vendor says the fix ships next month.', 'I would rather not change the schema now.'])}`,
    ask: (r, id) => r.pick([id, `what did ${id} say?`, `what is ${id} working on?`, `anything from ${id} in the notes?`]),
  },
]

// ---------------------------------------------------------------------------------------------
// The recall corpus

export interface CorpusQuery {
  kind: 'paraphrase' | 'identifier'
  /** Which frame or identifier type. */
  type: string
  text: string
  /** Indexes (into `passages`) of the passages that answer it. */
  gold: number[]
  /** Where the fact is: a short message or the middle of a long document. */
  where: 'short' | 'long'
}

export interface Corpus {
  passages: string[]
  queries: CorpusQuery[]
  stats: { documents: number; longDocuments: number; meanPassageChars: number }
}

/** The recall corpus's default seed. */
export const RECALL_SEED = 20261122

export interface RecallCorpusOptions {
  seed?: number
  /** Approximate number of passages (default 5,000). */
  passages?: number
  /** Planted facts of each paraphrase frame (default 12) and of each identifier type (default 20). */
  perParaphraseType?: number
  perIdentifierType?: number
  /** `splitPassages` maxChars / overlap (default: the service's, 800 / 120). */
  passageChars?: [maxChars: number, overlap: number]
}

interface Doc {
  text: string
  needles: Array<{ needle: string; query: Omit<CorpusQuery, 'gold'> }>
}

export function recallCorpus(opts: RecallCorpusOptions = {}): Corpus {
  const r = new Rng(opts.seed ?? RECALL_SEED)
  const targetPassages = opts.passages ?? 5000
  const perP = opts.perParaphraseType ?? 12
  const perI = opts.perIdentifierType ?? 20
  const people = FIRST.flatMap((f) => LAST.map((l) => `${f} ${l}`))
  const ctx: Ctx = { r, person: () => r.pick(people) }
  const docs: Doc[] = []

  // -- paraphrase facts: choose the planted (entity) of each frame, unique per frame.
  interface Planted {
    t: ParaphraseType
    e: string
  }
  const planted: Planted[] = []
  const pairPool = (t: ParaphraseType): string[] => {
    if (t.kind === 'flight arrival') return Array.from({ length: 400 }, () => `${ctx.person()}|${r.pick(CITIES)}`)
    if (t.kind === 'review requested changes') return Array.from({ length: 400 }, () => `${ctx.person()}|${r.pick(MODULES)}`)
    return Array.from({ length: 400 }, () => ctx.person())
  }
  const entityPools = new Map<ParaphraseType, string[]>()
  for (const t of PARAPHRASE) {
    const pool = [...new Set(t.entities.length ? t.entities : pairPool(t))]
    entityPools.set(t, pool)
    for (const e of r.sample(pool, Math.min(perP, pool.length))) planted.push({ t, e })
  }
  /** A sentence of frame `t` that is never the planted fact: a negative outcome, or the target outcome for an unplanted entity. */
  const reserved = new Set(planted.map((p) => `${p.t.kind}|${p.e}`))
  const frameSentence = (t: ParaphraseType, forEntity?: string): string => {
    const pool = entityPools.get(t)!
    const e = forEntity ?? r.pick(pool)
    if (!reserved.has(`${t.kind}|${e}`) && r.chance(0.4)) return t.fact(r, e)
    return t.negative(r, e)
  }
  const complaints = r.shuffle([...COMPLAINTS])
  const plantedComplaints = complaints.slice(0, Math.min(perP, complaints.length))
  const otherComplaints = complaints.slice(plantedComplaints.length)

  /** A filler sentence of a domain, often a frame sentence (hard negatives recur everywhere). */
  const filler = (domain: string): string => {
    const frames = PARAPHRASE.filter((t) => t.domain === domain)
    if (frames.length && r.chance(0.35)) {
      const t = r.pick(frames)
      // Half the time about a planted entity: the query's entity is not enough to find the fact.
      const planted_ = planted.filter((p) => p.t === t)
      return frameSentence(t, r.chance(0.5) && planted_.length ? r.pick(planted_).e : undefined)
    }
    if (domain === 'support' && r.chance(0.2)) {
      const c = r.pick(otherComplaints.length ? otherComplaints : COMPLAINTS)
      return `${r.pick(CUSTOMERS)} reported that ${c[0]}.`
    }
    return r.pick(FILLER[domain]!)(ctx)
  }
  const thread = (domain: string, chars: number, insert?: string): string => {
    const out: string[] = []
    let n = 0
    const second = r.pick(DOMAINS)
    while (n < chars) {
      const s = filler(r.chance(0.75) ? domain : second)
      const who = ctx.person().split(' ')[0]
      out.push(r.chance(0.6) ? `${who}: ${s}` : s)
      n += s.length + 1
    }
    if (insert) {
      // In the middle third of the thread.
      const at = Math.floor(out.length / 3) + r.int(Math.max(1, Math.floor(out.length / 3)))
      out.splice(at, 0, r.chance(0.5) ? `${ctx.person().split(' ')[0]}: ${insert}` : insert)
    }
    return out.join(r.chance(0.5) ? '\n' : ' ')
  }

  for (const { t, e } of planted) {
    const fact = t.fact(r, e)
    const query = { kind: 'paraphrase' as const, type: t.kind, text: t.ask(r, e) }
    if (r.chance(0.6)) {
      docs.push({ text: thread(t.domain, r.range(1200, 3200), fact), needles: [{ needle: fact, query: { ...query, where: 'long' } }] })
    } else {
      const before = r.chance(0.5) ? `${filler(t.domain)} ` : ''
      const after = r.chance(0.5) ? ` ${filler(t.domain)}` : ''
      docs.push({ text: `${before}${fact}${after}`, needles: [{ needle: fact, query: { ...query, where: 'short' } }] })
    }
    // The planted entity also appears in negatives of the same frame elsewhere.
    for (let i = r.range(2, 4); i > 0; i--) docs.push({ text: frameSentence(t, e), needles: [] })
  }
  for (const [passage, q] of plantedComplaints) {
    const customer = r.pick(CUSTOMERS)
    const fact = `${customer} reported that ${passage}.`
    const text = r.pick([`which customer said ${q}?`, `who complained that ${q}?`, `do we know which account has the issue where ${q}?`])
    const query = { kind: 'paraphrase' as const, type: 'customer complaint', text }
    if (r.chance(0.6))
      docs.push({ text: thread('support', r.range(1200, 3200), fact), needles: [{ needle: fact, query: { ...query, where: 'long' } }] })
    else docs.push({ text: `${filler('support')} ${fact}`, needles: [{ needle: fact, query: { ...query, where: 'short' } }] })
  }

  // -- identifier facts: long outputs of same-shape lines; one queried identifier each, unique in the corpus.
  const queriedIds = new Set<string>()
  const rare = r.shuffle([...RARE_LAST])
  for (const t of IDENTIFIER) {
    const fresh = (): string => {
      for (;;) {
        const id = t.kind === "person's name" ? `${r.pick(FIRST)} ${rare.pop() ?? `Rare${r.range(100, 999)}`}` : t.id(r)
        if (!queriedIds.has(id)) return id
      }
    }
    const otherId = (): string => {
      for (;;) {
        const id = t.kind === "person's name" ? ctx.person() : t.id(r)
        if (!queriedIds.has(id)) return id
      }
    }
    const n = t.kind === "person's name" ? Math.min(perI, RARE_LAST.length) : perI
    const wanted = Array.from({ length: n }, fresh)
    wanted.forEach((id) => queriedIds.add(id))
    // As many outputs again without a queried identifier (near-duplicate distractors only).
    const outputs = [...wanted, ...Array.from({ length: n }, () => null)]
    for (const id of outputs) {
      const lines = Array.from({ length: r.range(18, 40) }, () => t.line(r, otherId(), ctx))
      let needle = ''
      if (id) {
        needle = t.line(r, id, ctx)
        lines.splice(Math.floor(lines.length / 3) + r.int(Math.floor(lines.length / 3)), 0, needle)
      }
      const text = `${t.header(r)}\n${lines.join('\n')}`
      docs.push({
        text,
        needles: id ? [{ needle: id, query: { kind: 'identifier', type: t.kind, text: t.ask(r, id), where: 'long' } }] : [],
      })
    }
  }

  // -- fill up with long threads and short messages until the passage budget is reached.
  // (Counted with the service's splitting whatever `passageChars` is, so the documents are the same.)
  const passagesOf = (d: Doc) => splitPassages(d.text)
  let count = docs.reduce((n, d) => n + passagesOf(d).length, 0)
  while (count < targetPassages) {
    const domain = r.pick(DOMAINS)
    let text: string
    if (r.chance(0.12)) text = thread(domain, r.range(1200, 3500))
    else {
      const k = r.range(1, 3)
      text = Array.from({ length: k }, () => filler(domain)).join(' ')
    }
    docs.push({ text, needles: [] })
    count += passagesOf(docs[docs.length - 1]!).length
  }

  // -- a queried identifier must occur in its own document only: where a filler sentence made the same
  // one by chance (versions, invoice numbers), give that occurrence another identifier of the same shape.
  for (const owner of docs) {
    for (const { needle, query } of owner.needles) {
      if (query.kind !== 'identifier') continue
      const t = IDENTIFIER.find((x) => x.kind === query.type)!
      const re = tokenRegex(needle)
      for (const d of docs) {
        if (d === owner || d.text.search(re) === -1) continue
        let other = t.id(r)
        while (queriedIds.has(other) || other === needle) other = t.id(r)
        d.text = d.text.replace(re, other)
        for (const n of d.needles) n.needle = n.needle.replace(re, other)
      }
    }
  }

  // -- passages in a shuffled document order; gold = the passages that contain the needle.
  r.shuffle(docs)
  const passages: string[] = []
  const queries: CorpusQuery[] = []
  let longDocs = 0
  for (const d of docs) {
    const parts = opts.passageChars ? splitPassages(d.text, ...opts.passageChars) : passagesOf(d)
    if (parts.length > 1) longDocs++
    const first = passages.length
    passages.push(...parts)
    for (const { needle, query } of d.needles) {
      let gold = parts.map((p, i) => (p.includes(needle) ? first + i : -1)).filter((i) => i >= 0)
      if (gold.length === 0) {
        // The split cut the sentence: the passages holding either half of it.
        const head = needle.slice(0, Math.ceil(needle.length / 2))
        const tail = needle.slice(Math.floor(needle.length / 2))
        gold = parts.map((p, i) => (p.includes(head) || p.includes(tail) ? first + i : -1)).filter((i) => i >= 0)
      }
      if (gold.length === 0) throw new Error(`needle lost in splitting: ${needle}`)
      queries.push({ ...query, gold })
    }
  }
  const meanPassageChars = passages.reduce((n, p) => n + p.length, 0) / passages.length
  return { passages, queries, stats: { documents: docs.length, longDocuments: longDocs, meanPassageChars } }
}

/** Matches `id` as a whole token (not inside a longer identifier or number), every occurrence. */
function tokenRegex(id: string): RegExp {
  const esc = id.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  return new RegExp(`(?<![\\p{L}\\p{N}_.-])${esc}(?![\\p{L}\\p{N}_-]|\\.[\\p{L}\\p{N}])`, 'gu')
}

// ---------------------------------------------------------------------------------------------
// Short texts for the scale benchmark

/** `n` short messages (1–3 filler sentences, sometimes with an identifier), deterministic for `seed`. */
export function shortTexts(n: number, seed = 7): string[] {
  const r = new Rng(seed)
  const people = FIRST.flatMap((f) => LAST.map((l) => `${f} ${l}`))
  const ctx: Ctx = { r, person: () => r.pick(people) }
  const out: string[] = new Array<string>(n)
  for (let i = 0; i < n; i++) {
    const domain = r.pick(DOMAINS)
    const k = r.range(1, 3)
    let text = Array.from({ length: k }, () => r.pick(FILLER[domain]!)(ctx)).join(' ')
    if (r.chance(0.3)) {
      const t = r.pick(IDENTIFIER.filter((x) => x.kind !== "person's name"))
      text += ` ${t.line(r, t.id(r), ctx)}`
    }
    out[i] = text
  }
  return out
}
