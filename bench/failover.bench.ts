/**
 * failover: kill -9 of the replica running a turn → how long until another replica accepts the
 * next turn on that session (issue 16: ≤ lease duration + 2 s, median and max).
 *
 * Two server processes (A and B, bench/lib/child.ts) on one fresh PostgreSQL database (sessions on
 * PostgreSQL, memory off), BURROW_LEASE_MS = BENCH_LEASE_MS; their model is the fake LLM server
 * (test/helpers/fake-llm-server.ts, OpenAI wire format on loopback), scripted to stream a long
 * answer slowly, so the turn A runs stays open. Per run: a new session; a turn on A (SSE) until its
 * first text_delta, then a further hold spread over the runs across half a lease (so the kill
 * lands at every phase of A's renewal cycle: right after a renewal the lease has its full length
 * to run, which is the worst case); kill -9 A (t0); then POST …/turns on B every RETRY_MS —
 * 409 SESSION_BUSY while A's lease runs — until one is answered 200 (t1, when the answer arrives).
 * Failover = t1 − t0. Then the log is checked in the database: the cut-off turn closed once with
 * turn_failed (INTERRUPTED, process_restarted), the accepted turn completed after it, seqs
 * gapless, the session not left running. A is restarted under the same replica id for the next run.
 * BENCH_DEFAULT_LEASE_RUNS more runs repeat this with the default lease (10 s) on a fresh pair.
 *
 *   npx tsx bench/failover.bench.ts      (or: npx tsx bench/run.ts failover)
 *   BENCH_RUNS=12 BENCH_LEASE_MS=2000 BENCH_DEFAULT_LEASE_RUNS=2; PostgreSQL at BURROW_TEST_PG_URL
 */
import http from 'node:http'
import pg from 'pg'
import { burrowEnv } from './lib/env.js'
import { startServer } from './lib/child.js'
import { isMain, median, metric, percentile, sleep, target, type BenchResult, type Metric, type Target } from './lib/types.js'
import { tempDatabase } from '../test/helpers/pg.js'
import { startFakeLlm, type FakeLlmServer } from '../test/helpers/fake-llm-server.js'

const RUNS = Math.max(1, Number(process.env.BENCH_RUNS ?? 12))
const LEASE_MS = Number(process.env.BENCH_LEASE_MS ?? 2_000)
const DEFAULT_LEASE_MS = 10_000
const DEFAULT_LEASE_RUNS = Math.max(0, Number(process.env.BENCH_DEFAULT_LEASE_RUNS ?? 2))
const RETRY_MS = 25
const SLACK_MS = 2_000
const MODEL = 'openai:gpt-4o-mini'

interface RunRecord {
  failoverMs: number
  /** 409 SESSION_BUSY answers B gave before it accepted. */
  busy: number
  /** Hold after the first text_delta before the kill. */
  holdMs: number
  problems: string[]
}

/** Starts a turn on `base` as an SSE stream; resolves once its first text_delta arrives. The stream's end is ignored (the server is killed). */
function turnUntilFirstDelta(base: string, session: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ input: 'a long answer, please' })
    const req = http.request(
      `${base}/v1/sessions/${session}/turns`,
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json', accept: 'text/event-stream' } },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`turn on A → ${res.statusCode}`))
        res.setEncoding('utf8')
        let buf = ''
        res.on('data', (chunk: string) => {
          buf += chunk
          if (buf.includes('event: text_delta')) resolve()
        })
        res.on('error', () => undefined)
        res.on('end', () => reject(new Error('turn on A ended before its first text_delta')))
      },
    )
    req.on('error', (err) => reject(err))
    req.end(body)
  })
}

async function post(base: string, path: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  return { status: res.status, body: await res.json() }
}

/** The two replicas' environment: sessions on PostgreSQL, memory off, the fake LLM as OpenAI. */
function replicaEnv(url: string, id: string, leaseMs: number, fake: FakeLlmServer): Record<string, string> {
  return burrowEnv({
    BURROW_SESSION_STORE: 'postgres',
    BURROW_DATABASE_URL: url,
    BURROW_MEMORY_STORE: 'off',
    BURROW_REPLICA_ID: id,
    BURROW_LEASE_MS: String(leaseMs),
    OPENAI_API_KEY: 'k',
    OPENAI_BASE_URL: `${fake.url}/v1`,
  })
}

/** What the log must hold after a failover: turn 1 cut off and closed once, turn 2 completed, gapless, not running. */
async function checkLog(db: pg.Client, session: string): Promise<string[]> {
  const problems: string[] = []
  const ev = (await db.query('SELECT seq, turn, type, data FROM events WHERE session_id = $1 ORDER BY seq', [session])).rows as {
    seq: string
    turn: number
    type: string
    data: any
  }[]
  if (ev.some((e, i) => Number(e.seq) !== i + 1)) problems.push('log has gaps')
  const failed = ev.filter((e) => e.type === 'turn_failed')
  if (
    failed.length !== 1 ||
    failed[0]!.turn !== 1 ||
    failed[0]!.data?.code !== 'INTERRUPTED' ||
    failed[0]!.data?.reason !== 'process_restarted'
  )
    problems.push(`cut-off turn not closed once as INTERRUPTED/process_restarted: ${JSON.stringify(failed.map((e) => [e.turn, e.data]))}`)
  const completed = ev.filter((e) => e.type === 'turn_completed').map((e) => e.turn)
  if (completed.length !== 1 || completed[0] !== 2) problems.push(`completed turns ${JSON.stringify(completed)}, expected [2]`)
  const fi = ev.findIndex((e) => e.type === 'turn_failed')
  const si = ev.findIndex((e) => e.type === 'turn_started' && e.turn === 2)
  if (fi === -1 || si === -1 || si < fi) problems.push('the accepted turn did not start after the cut-off turn was closed')
  const row = (await db.query('SELECT running FROM sessions WHERE session_id = $1', [session])).rows[0]
  if (!row || row.running !== false) problems.push(`session row running=${row?.running}`)
  return problems
}

/** RUNS failovers with one lease duration: A runs the turn and is killed, B takes over; A restarted between runs. */
async function series(
  url: string,
  db: pg.Client,
  fake: FakeLlmServer,
  leaseMs: number,
  runs: number,
  log: (s: string) => void,
): Promise<RunRecord[]> {
  let A = await startServer('burrow', replicaEnv(url, 'replica-a', leaseMs, fake))
  const B = await startServer('burrow', replicaEnv(url, 'replica-b', leaseMs, fake))
  const out: RunRecord[] = []
  try {
    for (let i = 0; i < runs; i++) {
      const created = await post(A.url, '/v1/sessions', { model: MODEL })
      if (created.status !== 201 && created.status !== 200) throw new Error(`create session → ${created.status}`)
      const session = created.body.session_id as string
      // 400 frames of 8 chars, 100 ms apart: the answer would take 40 s, far past the kill.
      fake.enqueue({ text: 'x'.repeat(3_200), chunkSize: 8, delayMs: 100 })
      await turnUntilFirstDelta(A.url, session)
      // Spread the kill over half a lease after the first delta, so it meets every phase of the renewal cycle (every third of the lease).
      const holdMs = Math.round(((i + 0.5) / runs) * (leaseMs / 2))
      await sleep(holdMs)
      fake.enqueue({ text: 'recovered on B' })
      process.kill(A.pid, 'SIGKILL')
      const t0 = performance.now()
      let busy = 0
      const problems: string[] = []
      let accepted: { status: number; body: any } | null = null
      const deadline = t0 + leaseMs + 15_000
      while (performance.now() < deadline) {
        const r = await post(B.url, `/v1/sessions/${session}/turns`, { input: 'after the kill' })
        if (r.status === 409 && r.body?.code === 'SESSION_BUSY') busy++
        else {
          accepted = r
          break
        }
        await sleep(RETRY_MS)
      }
      const failoverMs = performance.now() - t0
      if (!accepted) problems.push(`not accepted within ${leaseMs + 15_000} ms`)
      else if (accepted.status !== 200 || accepted.body.status !== 'completed' || accepted.body.turn !== 2)
        problems.push(`answer on B: ${accepted.status} ${JSON.stringify(accepted.body).slice(0, 200)}`)
      problems.push(...(await checkLog(db, session)))
      if (fake.pending() !== 0) problems.push(`${fake.pending()} scripted answers left unused`)
      out.push({ failoverMs, busy, holdMs, problems })
      log(
        `lease ${leaseMs} ms, run ${i + 1}/${runs}: kill ${holdMs} ms after the first delta → accepted on B after ${failoverMs.toFixed(0)} ms ` +
          `(${busy} × SESSION_BUSY)${problems.length ? `; PROBLEMS: ${problems.join('; ')}` : ''}`,
      )
      await A.stop() // reaps the killed process and removes its data directory
      A = await startServer('burrow', replicaEnv(url, 'replica-a', leaseMs, fake))
    }
  } finally {
    await A.stop()
    await B.stop()
  }
  return out
}

const round = (x: number) => Math.round(x)

export async function run(): Promise<BenchResult> {
  const t0 = performance.now()
  const log = (s: string) => console.log(`[failover] ${s}`)
  const database = await tempDatabase(undefined, 'failover')
  const fake = await startFakeLlm({ openaiKey: 'k' })
  const db = new pg.Client({ connectionString: database.url })
  let main: RunRecord[] = []
  let long: RunRecord[] = []
  try {
    await db.connect()
    main = await series(database.url, db, fake, LEASE_MS, RUNS, log)
    if (DEFAULT_LEASE_RUNS > 0 && LEASE_MS !== DEFAULT_LEASE_MS)
      long = await series(database.url, db, fake, DEFAULT_LEASE_MS, DEFAULT_LEASE_RUNS, log)
  } finally {
    await db.end().catch(() => undefined)
    await fake.close()
    await database.drop()
  }
  const ms = main.map((r) => r.failoverMs).sort((a, b) => a - b)
  const longMs = long.map((r) => r.failoverMs).sort((a, b) => a - b)
  const violations = [...main, ...long].filter((r) => r.problems.length > 0)
  const bound = LEASE_MS + SLACK_MS
  const metrics: Metric[] = [
    metric(`failover, median (lease ${LEASE_MS} ms)`, round(median(ms)), 'ms'),
    metric(`failover, p90 (lease ${LEASE_MS} ms)`, round(percentile(ms, 90)), 'ms'),
    metric(`failover, max (lease ${LEASE_MS} ms)`, round(ms.at(-1) ?? NaN), 'ms'),
    metric(`failover, min (lease ${LEASE_MS} ms)`, round(ms[0] ?? NaN), 'ms'),
    metric('SESSION_BUSY answers before the accepted turn, median', median(main.map((r) => r.busy)), 'answers'),
  ]
  const targets: Target[] = [
    target(`failover, median (lease ${LEASE_MS} ms + 2 s)`, round(median(ms)), '<=', bound, 'ms'),
    target(`failover, max (lease ${LEASE_MS} ms + 2 s)`, round(ms.at(-1) ?? NaN), '<=', bound, 'ms'),
    target('runs with a wrong answer or log (cut-off turn not closed, accepted turn missing, gaps)', violations.length, '<=', 0, 'runs'),
    target('runs', ms.length, '>=', 10, 'runs'),
  ]
  if (long.length) {
    metrics.push(
      metric(`failover, median (default lease ${DEFAULT_LEASE_MS} ms, ${long.length} runs)`, round(median(longMs)), 'ms'),
      metric(`failover, max (default lease ${DEFAULT_LEASE_MS} ms, ${long.length} runs)`, round(longMs.at(-1) ?? NaN), 'ms'),
    )
    targets.push(
      target(
        `failover, max (default lease ${DEFAULT_LEASE_MS} ms + 2 s)`,
        round(longMs.at(-1) ?? NaN),
        '<=',
        DEFAULT_LEASE_MS + SLACK_MS,
        'ms',
      ),
    )
  }
  const notes = [
    `Lease ${LEASE_MS} ms, failover per run (ms, in run order): ${main.map((r) => round(r.failoverMs)).join(', ')}; ` +
      `kill after the first delta + ${main.map((r) => r.holdMs).join(', ')} ms.`,
    ...(long.length ? [`Default lease ${DEFAULT_LEASE_MS} ms, per run: ${long.map((r) => round(r.failoverMs)).join(', ')} ms.`] : []),
    `A lease is renewed every third of its duration, so B can take it between ⅔ of a lease and a whole lease after the kill ` +
      `(plus up to one retry interval of ${RETRY_MS} ms and the accepted turn itself); the spread of the kill over half a lease makes both ends show up.`,
    violations.length
      ? `Problems: ${violations
          .slice(0, 3)
          .map((r) => r.problems.join('; '))
          .join(' | ')}.`
      : 'Every run: the cut-off turn closed once (turn_failed INTERRUPTED, process_restarted), the accepted turn completed after it, the log gapless.',
  ]
  const result: BenchResult = {
    name: 'failover',
    title: 'Failover: kill -9 of the replica running a turn (PostgreSQL)',
    description:
      'Two replicas (A, B) on one fresh PostgreSQL database (sessions on PostgreSQL, memory off), the fake LLM on loopback streaming a ' +
      'long answer slowly. Per run: a new session, a turn on A until its first `text_delta` and a further hold (spread over half a lease), ' +
      `\`kill -9\` A, then \`POST …/turns\` on B every ${RETRY_MS} ms (409 \`SESSION_BUSY\` while A's lease runs) until one is answered 200. ` +
      'Failover = the kill → the accepted answer. The log is then checked in the database; A is restarted under the same replica id.',
    config: {
      BURROW_LEASE_MS: LEASE_MS,
      runs: RUNS,
      'retry interval': `${RETRY_MS} ms`,
      'runs with the default lease (10 s)': long.length,
      model: `${MODEL} (fake LLM server)`,
    },
    metrics,
    targets,
    pass: false,
    notes,
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
