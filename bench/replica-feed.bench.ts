/**
 * replica-feed: delivery of a turn's events to SSE subscribers on another replica (PostgreSQL).
 *
 * Two server processes (A and B) on one fresh PostgreSQL database. SUBSCRIBERS raw SSE streams
 * follow one session on A and as many on B; TURNS turns run on B one after the other. For every
 * stored event and every subscriber: delivery latency = receive time (here) − the event's `at`
 * (B's clock, same machine; `at` is taken when the event is made, so the figure includes B's
 * commit). Subscribers on B are the same-replica baseline; those on A get the events through
 * the change feed (NOTIFY after the commit, A reads them back from the log). Every subscriber must
 * receive every stored event exactly once, in seq order.
 *
 *   npx tsx bench/replica-feed.bench.ts      (or: npx tsx bench/run.ts replica-feed)
 *   BENCH_SUBSCRIBERS=100 BENCH_TURNS=100; PostgreSQL at BURROW_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 */
import http from 'node:http'
import { burrowEnv } from './lib/env.js'
import { startServer, type ServerChild } from './lib/child.js'
import { isMain, metric, percentile, sleep, target, type BenchResult } from './lib/types.js'
import { tempDatabase } from '../test/helpers/pg.js'

const SUBSCRIBERS = Number(process.env.BENCH_SUBSCRIBERS ?? 100)
const TURNS = Number(process.env.BENCH_TURNS ?? 100)
const TARGET_P99_MS = 50

const now = () => performance.timeOrigin + performance.now()

/** One SSE stream: stored events recorded as (seq, latency). */
class Subscriber {
  readonly latencies: number[] = []
  lastSeq = 1
  gaps = 0
  duplicates = 0
  private buf = ''
  private req: http.ClientRequest | null = null

  open(url: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const req = http.get(url, { agent: false, headers: { accept: 'text/event-stream', 'last-event-id': '1' } }, (res) => {
        if (res.statusCode !== 200) return reject(new Error(`GET events → ${res.statusCode}`))
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => this.feed(chunk, now()))
        res.on('error', () => undefined)
        resolve()
      })
      req.on('error', reject)
      this.req = req
    })
  }

  close(): void {
    this.req?.destroy()
  }

  private feed(chunk: string, t: number): void {
    const buf = this.buf + chunk
    let start = 0
    for (let end = buf.indexOf('\n\n'); end !== -1; end = buf.indexOf('\n\n', start)) {
      const f = buf.slice(start, end)
      start = end + 2
      if (!f.startsWith('id: ') || f.includes('\nevent: text_delta\n')) continue
      const e = JSON.parse(f.slice(f.indexOf('\ndata: ') + 7)) as { seq: number; at: string }
      if (e.seq <= this.lastSeq) this.duplicates++
      else {
        this.gaps += e.seq - this.lastSeq - 1
        this.lastSeq = e.seq
        this.latencies.push(t - Date.parse(e.at))
      }
    }
    this.buf = start === 0 ? buf : buf.slice(start)
  }
}

async function post(base: string, path: string, body: unknown): Promise<any> {
  const res = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  const json = await res.json()
  if (!res.ok) throw new Error(`POST ${path} → ${res.status} ${JSON.stringify(json)}`)
  return json
}

const sorted = (subs: Subscriber[]) => Float64Array.from(subs.flatMap((s) => s.latencies)).sort()

export async function run(): Promise<BenchResult> {
  const t0 = performance.now()
  const log = (s: string) => console.log(`[replica-feed] ${s}`)
  const db = await tempDatabase(undefined, 'feed')
  const url = db.url
  const servers: ServerChild[] = []
  const subs: { a: Subscriber[]; b: Subscriber[] } = { a: [], b: [] }
  let last = 0
  try {
    for (const id of ['a', 'b'])
      servers.push(
        await startServer('burrow', burrowEnv({ BURROW_SESSION_STORE: 'postgres', BURROW_DATABASE_URL: url, BURROW_REPLICA_ID: id })),
      )
    const [A, B] = servers as [ServerChild, ServerChild]
    const session = (await post(A.url, '/v1/sessions', { model: 'offline:echo' })).session_id as string
    for (const [side, server] of [
      ['a', A],
      ['b', B],
    ] as const) {
      for (let i = 0; i < SUBSCRIBERS; i++) {
        const s = new Subscriber()
        await s.open(`${server.url}/v1/sessions/${session}/events`)
        subs[side].push(s)
      }
    }
    await sleep(200)
    log(`${SUBSCRIBERS} subscribers on each replica; ${TURNS} turns on B`)
    for (let i = 0; i < TURNS; i++)
      last = (await post(B.url, `/v1/sessions/${session}/turns`, { input: `turn ${i} of the feed benchmark` })).last_seq
    const deadline = Date.now() + 20_000
    while ([...subs.a, ...subs.b].some((s) => s.lastSeq < last) && Date.now() < deadline) await sleep(20)
  } finally {
    for (const s of [...subs.a, ...subs.b]) s.close()
    for (const s of servers) await s.stop()
    await db.drop()
  }
  const cross = sorted(subs.a)
  const same = sorted(subs.b)
  const all = [...subs.a, ...subs.b]
  const expected = (last - 1) * all.length
  const received = all.reduce((n, s) => n + s.latencies.length, 0)
  const gaps = all.reduce((n, s) => n + s.gaps, 0)
  const duplicates = all.reduce((n, s) => n + s.duplicates, 0)
  const p = (xs: Float64Array, q: number) => Math.round(percentile(xs, q) * 100) / 100
  const result: BenchResult = {
    name: 'replica-feed',
    title: 'Cross-replica delivery on PostgreSQL (change feed)',
    description:
      "Two replicas on one PostgreSQL database; subscribers to one session on each; turns run on B. Latency = receive time − the event's `at` (taken when the event is made, so it includes B's commit). B's subscribers are the same-replica baseline; A's get the events through NOTIFY and a read of the log.",
    config: { subscribers_per_replica: SUBSCRIBERS, turns: TURNS, stored_events: last - 1 },
    metrics: [
      metric('p50, subscriber on A (other replica)', p(cross, 50), 'ms', p(same, 50)),
      metric('p99, subscriber on A (other replica)', p(cross, 99), 'ms', p(same, 99)),
      metric('max, subscriber on A (other replica)', p(cross, 100), 'ms', p(same, 100)),
      metric('events received / expected', received, 'events', expected),
    ],
    targets: [
      target('cross-replica p99 (commit to delivery, 100 subscribers on A)', p(cross, 99), '<=', TARGET_P99_MS, 'ms'),
      target('gaps + duplicates', gaps + duplicates, '<=', 0, 'events'),
      target('events missing', expected - received, '<=', 0, 'events'),
    ],
    pass: false,
    notes: [
      `Same replica (B): p50 ${p(same, 50)} ms, p99 ${p(same, 99)} ms; other replica (A): p50 ${p(cross, 50)} ms, p99 ${p(cross, 99)} ms.`,
    ],
    date: new Date().toISOString(),
    durationSeconds: Math.round((performance.now() - t0) / 100) / 10,
  }
  result.pass = result.targets.every((t) => t.pass)
  return result
}

if (isMain(import.meta.url)) {
  const r = await run()
  console.log(JSON.stringify(r, null, 2))
}
