/**
 * turns-durable: end-to-end turns/s over HTTP with the session store on (`lmdb`, `fsync`)
 * versus off (ephemeral), `lmdb` + `relaxed` as a third row, and PostgreSQL (a fresh database on
 * the local server, `synchronous_commit` on) as a fourth, against `lmdb` + `fsync` (issue 16:
 * ≥ 0.5×) — same run, same load. bench/pg-driver measures the commit statement alone.
 *
 * autocannon drives `POST /v1/sessions/{id}/turns` (offline:echo provider: no network, no
 * model time), one session per connection (one turn per session at a time), pipelining 1,
 * as in turn-overhead. Each configuration runs alone in a child process (bench/lib/child.ts)
 * with a fresh data directory; a warm-up run on other sessions precedes the measured run on
 * fresh sessions. Any non-2xx response or error fails the benchmark.
 *
 * The configurations run in rounds (the order rotated each round), because this shared VM's
 * speed drifts by ±10 % between runs: the target is the median over the rounds of each round's
 * fsync / ephemeral ratio, every round is reported, and the other figures are means over them.
 *
 *   npx tsx bench/turns-durable.bench.ts      (or: npx tsx bench/run.ts turns-durable)
 *   BENCH_CONNECTIONS=100 BENCH_DURATION=8 BENCH_WARMUP=2 BENCH_ROUNDS=3 to change the load;
 *   BENCH_ONLY=fsync (with BENCH_CPU_PROF=1) to run and profile one configuration (no result);
 *   BENCH_PG_POOL_SIZE=N for the postgres row's BURROW_PG_POOL_SIZE (default: the service's).
 */
import type { AutocannonClient, AutocannonRequest } from 'autocannon'
import { burrowEnv, capabilitySummary } from './lib/env.js'
import { startServer, type ServerChild } from './lib/child.js'
import { meanLoad, runLoad, statusCodes, type Load } from './lib/load.js'
import { isMain, median, metric, target, type BenchResult } from './lib/types.js'
import { tempDatabase } from '../test/helpers/pg.js'

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 100)
const DURATION_S = Number(process.env.BENCH_DURATION ?? 8)
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 2)
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3))
const BODY = JSON.stringify({ input: 'hello' })
const HEADERS = { 'content-type': 'application/json' }

const TARGET_FSYNC_RATIO = 0.6
const TARGET_PG_RATIO = 0.5

/**
 * The configurations; the store switches are forced here (they are what is compared), memory and compaction stay off.
 * The keyed rows send every turn with an Idempotency-Key of its own: the outcome committed with the turn's end, and the
 * model called only once the turn's start (naming the key) is durable — compared with the same store without keys.
 */
const ROWS = [
  { key: 'ephemeral', label: 'ephemeral (BURROW_SESSION_STORE=off)', env: { BURROW_SESSION_STORE: 'off' }, keyed: false },
  { key: 'fsync', label: 'lmdb, fsync', env: { BURROW_SESSION_STORE: 'lmdb', BURROW_DURABILITY: 'fsync' }, keyed: false },
  { key: 'relaxed', label: 'lmdb, relaxed', env: { BURROW_SESSION_STORE: 'lmdb', BURROW_DURABILITY: 'relaxed' }, keyed: false },
  { key: 'postgres', label: 'postgres (synchronous_commit on)', env: { BURROW_SESSION_STORE: 'postgres' }, keyed: false },
  {
    key: 'fsyncKeyed',
    label: 'lmdb, fsync, Idempotency-Key on every turn',
    env: { BURROW_SESSION_STORE: 'lmdb', BURROW_DURABILITY: 'fsync' },
    keyed: true,
  },
  { key: 'postgresKeyed', label: 'postgres, Idempotency-Key on every turn', env: { BURROW_SESSION_STORE: 'postgres' }, keyed: true },
] as const
type RowKey = (typeof ROWS)[number]['key']

async function cannon(server: ServerChild, duration: number, setupClient: (c: AutocannonClient) => void): Promise<Load> {
  return runLoad(server, { url: server.url, connections: CONNECTIONS, duration, method: 'POST', headers: HEADERS, body: BODY, setupClient })
}

async function json(url: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(url, { method: 'POST', headers: HEADERS, body: JSON.stringify(body) })
  return { status: res.status, body: await res.json() }
}

async function createSessions(base: string, n: number): Promise<string[]> {
  const ids: string[] = []
  for (let i = 0; i < n; i += 20) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(20, n - i) }, () => json(`${base}/v1/sessions`, { model: 'offline:echo' })),
    )
    for (const r of batch) {
      if (r.status !== 201) throw new Error(`POST /v1/sessions → ${r.status} ${JSON.stringify(r.body)}`)
      ids.push(r.body.session_id)
    }
  }
  return ids
}

/** The n-th autocannon client drives sessions[n] only: no two turns ever share a session. `keyed`: each turn with a key of its own. */
function perConnectionSession(sessions: string[], keyed = false): (c: AutocannonClient) => void {
  let next = 0
  let n = 0
  return (client) => {
    const id = sessions[next++]
    if (id === undefined) throw new Error(`more autocannon connections than sessions (${sessions.length})`)
    const request: AutocannonRequest = { method: 'POST', path: `/v1/sessions/${id}/turns`, headers: HEADERS, body: BODY }
    const withKey = (req: AutocannonRequest) => ({ ...req, headers: { ...req.headers, 'idempotency-key': `bench-${n++}` } })
    client.setRequests([keyed ? { ...request, setupRequest: withKey } : request])
  }
}

export async function run(): Promise<BenchResult> {
  const t0 = performance.now()
  const log = (s: string) => console.log(`[turns-durable] ${s}`)
  const runs = { ephemeral: [], fsync: [], relaxed: [], postgres: [], fsyncKeyed: [], postgresKeyed: [] } as Record<RowKey, Load[]>
  const envs = {} as Record<RowKey, Record<string, string>>
  const storedAfter: Partial<Record<RowKey, number>> = {}
  const only = process.env.BENCH_ONLY
  const rows = ROWS.filter((r) => !only || r.key === only)
  for (let round = 0; round < ROUNDS; round++) {
    // The order rotates, so no configuration always runs first (or last) in a round.
    for (const row of rows.map((_, i) => rows[(i + round) % rows.length]!)) {
      // PostgreSQL: a database of its own per run, dropped after.
      const db = row.env.BURROW_SESSION_STORE === 'postgres' ? await tempDatabase(undefined, 'turns') : undefined
      const env = {
        ...burrowEnv({}),
        ...row.env,
        ...(db ? { BURROW_DATABASE_URL: db.url } : {}),
        ...(db && process.env.BENCH_PG_POOL_SIZE ? { BURROW_PG_POOL_SIZE: process.env.BENCH_PG_POOL_SIZE } : {}),
        BURROW_MEMORY_STORE: 'off',
        BURROW_COMPACTION: 'off',
      }
      envs[row.key] = env
      const server = await startServer('burrow', env).catch(async (err: unknown) => {
        await db?.drop()
        throw err
      })
      try {
        const [probe] = await createSessions(server.url, 1)
        const sample = await json(`${server.url}/v1/sessions/${probe}/turns`, { input: 'hello' })
        if (sample.status !== 200 || sample.body.status !== 'completed' || sample.body.output_text !== 'echo: hello') {
          throw new Error(`${row.label}: unexpected turn result ${sample.status} ${JSON.stringify(sample.body)}`)
        }
        const warmSessions = await createSessions(server.url, CONNECTIONS)
        const runSessions = await createSessions(server.url, CONNECTIONS)
        log(
          `round ${round + 1}/${ROUNDS}, ${row.label}: warm-up ${WARMUP_S}s, then ${DURATION_S}s × ${CONNECTIONS} connections (one session each)`,
        )
        const warm = await cannon(server, WARMUP_S, perConnectionSession(warmSessions, row.keyed))
        if (warm.non2xx + warm.errors > 0)
          log(`  warm-up: ${warm.non2xx} non-2xx, ${warm.errors} errors ${JSON.stringify(warm.statusCodes)}`)
        const l = await cannon(server, DURATION_S, perConnectionSession(runSessions, row.keyed))
        runs[row.key].push(l)
        log(
          `  ${l.reqPerSec.toFixed(0)} turns/s, p50 ${l.p50} ms, p99 ${l.p99} ms, server CPU ${(l.serverCpu * 100).toFixed(0)} %` +
            (l.non2xx + l.errors > 0 ? `; ${l.non2xx} non-2xx, ${l.errors} errors ${JSON.stringify(l.statusCodes)}` : ''),
        )
        if (row.key !== 'ephemeral') {
          // The first measured session, read back: every turn it acknowledged is in the log.
          const res = await fetch(`${server.url}/v1/sessions/${runSessions[0]}`)
          const view = (await res.json()) as { last_seq?: number }
          storedAfter[row.key] = view.last_seq ?? NaN
        }
      } finally {
        await server.stop()
        await db?.drop()
      }
    }
  }

  if (only) throw new Error(`BENCH_ONLY=${only}: diagnostic run, no result`)
  const loads = {
    ephemeral: meanLoad(runs.ephemeral),
    fsync: meanLoad(runs.fsync),
    relaxed: meanLoad(runs.relaxed),
    postgres: meanLoad(runs.postgres),
    fsyncKeyed: meanLoad(runs.fsyncKeyed),
    postgresKeyed: meanLoad(runs.postgresKeyed),
  }
  const e = loads.ephemeral
  const f = loads.fsync
  const r = loads.relaxed
  const pg = loads.postgres
  const perRound = (k: RowKey, base: RowKey = 'ephemeral') => runs[k].map((l, i) => l.reqPerSec / runs[base][i]!.reqPerSec)
  const bad = ROWS.reduce((n, row) => n + runs[row.key].reduce((m, l) => m + l.non2xx + l.errors, 0), 0)
  const targets = [
    target('lmdb fsync turns/s / ephemeral turns/s (median of per-round ratios)', median(perRound('fsync')), '>=', TARGET_FSYNC_RATIO, '×'),
    target(
      'postgres turns/s / lmdb fsync turns/s (median of per-round ratios)',
      median(perRound('postgres', 'fsync')),
      '>=',
      TARGET_PG_RATIO,
      '×',
    ),
    target('non-2xx responses + errors (every configuration)', bad, '<=', 0, ''),
  ]
  const fk = loads.fsyncKeyed
  const pk = loads.postgresKeyed
  const both = (name: string, pick: (l: Load) => number, unit: string) => [
    metric(`lmdb fsync: ${name}`, pick(f), unit, pick(e)),
    metric(`lmdb relaxed: ${name}`, pick(r), unit, pick(e)),
    metric(`postgres vs lmdb fsync: ${name}`, pick(pg), unit, pick(f)),
    metric(`lmdb fsync, keyed vs not: ${name}`, pick(fk), unit, pick(f)),
    metric(`postgres, keyed vs not: ${name}`, pick(pk), unit, pick(pg)),
  ]
  const metrics = [
    ...both('turns/s (mean of rounds)', (l) => l.reqPerSec, 'turns/s'),
    ...both('latency p50', (l) => l.p50, 'ms'),
    ...both('latency p90', (l) => l.p90, 'ms'),
    ...both('latency p99', (l) => l.p99, 'ms'),
    ...both('server CPU', (l) => l.serverCpu * 100, '%'),
    ...both('server CPU time per turn', (l) => (l.serverCpu * 1e6) / l.reqPerSec, 'µs'),
    ...both('responses (all rounds)', (l) => l.total * ROUNDS, ''),
    ...both('non-2xx responses + errors (all rounds)', (l) => (l.non2xx + l.errors) * ROUNDS, ''),
  ]
  const list = (xs: number[], digits = 2) => xs.map((x) => x.toFixed(digits)).join(' / ')
  const secs = (l: Load) => `${l.perSecond[0] ?? '?'} → ${l.perSecond.at(-1) ?? '?'}`
  const notes = [
    `Per round, turns/s — ephemeral ${list(
      runs.ephemeral.map((l) => l.reqPerSec),
      0,
    )}; fsync ${list(
      runs.fsync.map((l) => l.reqPerSec),
      0,
    )}; ` +
      `relaxed ${list(
        runs.relaxed.map((l) => l.reqPerSec),
        0,
      )}. Each round's ratio to that round's ephemeral run: fsync ${list(perRound('fsync'))}, ` +
      `relaxed ${list(perRound('relaxed'))}; postgres ${list(
        runs.postgres.map((l) => l.reqPerSec),
        0,
      )}, its ratio to that round's fsync run ${list(perRound('postgres', 'fsync'))}; the targets take the median (fsync ${median(perRound('fsync')).toFixed(3)}×; the mean of rounds ` +
      `${(f.reqPerSec / e.reqPerSec).toFixed(3)}×).`,
    `Ephemeral: ${e.reqPerSec.toFixed(0)} turns/s, p50 ${e.p50} ms, p99 ${e.p99} ms (the baseline column, means of rounds). ` +
      `fsync: ${((100 * f.reqPerSec) / e.reqPerSec).toFixed(0)} % of it; relaxed: ${((100 * r.reqPerSec) / e.reqPerSec).toFixed(0)} %.`,
    `With an Idempotency-Key on every turn, each round's ratio to the same store without keys: lmdb fsync ${list(perRound('fsyncKeyed', 'fsync'))}, ` +
      `postgres ${list(perRound('postgresKeyed', 'postgres'))}. A keyed turn's outcome is written in its last commit (no write of its own), ` +
      `and a remote model is called once its turn_started (naming the key) is durable — not \`offline:echo\`, which answers in process, so ` +
      `here a keyed turn is one commit as an unkeyed one is (with a real model the start and the answer are two commits either way, ` +
      `the model's time apart); on PostgreSQL a keyed turn also claims its key and checks it under the session's lease (two statements).`,
    `Status codes (all rounds) — ephemeral ${JSON.stringify(statusCodes(runs.ephemeral))}, fsync ${JSON.stringify(statusCodes(runs.fsync))}, relaxed ${JSON.stringify(statusCodes(runs.relaxed))}, postgres ${JSON.stringify(statusCodes(runs.postgres))}.`,
    `PostgreSQL (the server on this machine, \`synchronous_commit\` and fsync on): a turn commits its events (the history messages they add and the session's small head, with the fencing check) under the session's lease; the replica keeps the lease for \`BURROW_LEASE_LINGER_MS\` (2 s by default) after the turn, so with one session per connection only a session's first turn takes it (and it is released 2 s after the last). Commits are group-committed across sessions: what queues while a statement is in flight goes as the next one (PgCommitWriter; leases have a batcher of their own), so under this load a statement carries a dozen or more sessions; commits wait for their WAL flush (pool \`BURROW_PG_POOL_SIZE\` ${envs.postgres?.BURROW_PG_POOL_SIZE ?? '10, the default'}). The database runs on the same two cores as the server and autocannon.`,
    `Turns/s first → last second of the last round's measured run: ephemeral ${secs(runs.ephemeral.at(-1)!)}, fsync ${secs(runs.fsync.at(-1)!)}, ` +
      `relaxed ${secs(runs.relaxed.at(-1)!)}; ≈ ${(f.total / CONNECTIONS).toFixed(0)} turns per session by the end of an fsync run.`,
    'A turn hands its events to the store as they happen and does not wait for them (LmdbBatchWriter): the store writes every session ' +
      'queued while lmdb-js committed the previous batch in one child transaction, so an `offline:echo` turn — whose answer comes before ' +
      'that — usually reaches the log as one row (its three events and two messages) and one head write, and the batches of all 100 sessions ' +
      'share one transaction and, at `fsync`, one flush. The response waits for the flush of its own batch. With the store on, the projector ' +
      '(session.json + transcript.md per session, at most once a second each) runs in the same process and its CPU is included.',
    `Server CPU time per turn (CPU share / turns per second): ephemeral ${((e.serverCpu * 1e6) / e.reqPerSec).toFixed(0)} µs, ` +
      `fsync ${((f.serverCpu * 1e6) / f.reqPerSec).toFixed(0)} µs, relaxed ${((r.serverCpu * 1e6) / r.reqPerSec).toFixed(0)} µs` +
      (ROWS.every((row) => loads[row.key].serverCpu >= 0.95)
        ? ' — the server kept at least one core busy in every configuration, so throughput is roughly the inverse of this cost; bench/store-append ' +
          'measures what the commits cost in the store alone.'
        : '.'),
    `Server CPU (CPU time / wall time of the server process): ephemeral ${(e.serverCpu * 100).toFixed(0)} %, fsync ${(f.serverCpu * 100).toFixed(0)} %, ` +
      `relaxed ${(r.serverCpu * 100).toFixed(0)} % — below ~95 % the server was waiting (on the disk, or on the load generator).`,
    `Stored seq of the first measured session read back after the last round's run: fsync ${storedAfter.fsync ?? 'n/a'}, relaxed ${storedAfter.relaxed ?? 'n/a'}, postgres ${storedAfter.postgres ?? 'n/a'}.`,
  ]
  return {
    name: 'turns-durable',
    title: 'Durable turns: session store on (LMDB fsync / relaxed, PostgreSQL) vs. ephemeral',
    description: [
      'autocannon (programmatic, one process) against `POST /v1/sessions/{id}/turns` with `{"input":"hello"}` on the `offline:echo`',
      'provider, one session per connection, pipelining 1 — the turn-overhead approach — once per configuration, each alone in a',
      'child process with a fresh data directory: `BURROW_SESSION_STORE=off` (ephemeral, the baseline column), `lmdb` with',
      '`BURROW_DURABILITY=fsync` (a commit resolves once flushed to disk), `lmdb` with `relaxed`, and `postgres` (a fresh database on the',
      'local PostgreSQL per run, `synchronous_commit` on; compared with `lmdb` + `fsync`). Each configuration gets a warm-up',
      'run on other sessions, then the measured run on fresh sessions. The configurations run in rounds, the order rotated each round;',
      "the target is the median over the rounds of each round's fsync / ephemeral ratio, the other figures are means over the rounds.",
      "Latency is autocannon's per-request time (whole milliseconds).",
    ].join(' '),
    config: {
      connections: CONNECTIONS,
      'duration (s)': DURATION_S,
      'warm-up (s)': WARMUP_S,
      rounds: ROUNDS,
      pipelining: 1,
      'request body': BODY,
      model: 'offline:echo',
      'data dir': `fresh ${envs.fsync.BURROW_DATA_DIR?.replace(/-[^-/]+$/, '-*') ?? 'n/a'}`,
      'capabilities (fsync row)': capabilitySummary(envs.fsync),
    },
    metrics,
    targets,
    pass: targets.every((t) => t.pass),
    notes,
    date: new Date().toISOString(),
    durationSeconds: (performance.now() - t0) / 1000,
  }
}

if (isMain(import.meta.url)) {
  const r = await run()
  console.log(JSON.stringify(r, null, 2))
  process.exitCode = r.pass ? 0 : 1
}
