/**
 * turn-overhead: what a full turn through the service costs over a bare fastify route.
 *
 * autocannon drives `POST /v1/sessions/{id}/turns` (offline:echo provider, so no network
 * and no model time) and, in the same run with the same connections and duration, a
 * hello-world fastify app answering `POST /hello` with `{"hello":"world"}`. Both servers
 * run in a child process; this process only generates load.
 *
 * One turn may run per session at a time, so every autocannon connection gets its own
 * session (setupClient), pipelining is 1, and any non-2xx response fails the benchmark.
 * The two phases run in rounds (order alternating) and the targets take the median of the
 * per-round ratios: on this shared VM the baseline alone moves by 25 % between runs.
 *
 *   npx tsx bench/turn-overhead.bench.ts      (or: npx tsx bench/run.ts turn-overhead)
 *   BENCH_CONNECTIONS=100 BENCH_DURATION=10 BENCH_WARMUP=3 BENCH_ROUNDS=3 to change the load.
 */
import type { AutocannonClient } from 'autocannon'
import { burrowEnv, capabilitySummary } from './lib/env.js'
import { startServer, type ServerChild } from './lib/child.js'
import { meanLoad, runLoad, type Load } from './lib/load.js'
import { isMain, median, metric, target, type BenchResult } from './lib/types.js'

/** The service env for this benchmark (capability switches live in lib/env.ts BURROW_ENV). */
const ENV = burrowEnv({})

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 100)
const DURATION_S = Number(process.env.BENCH_DURATION ?? 10)
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 3)
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3))
/** Diagnostic run: sessions per connection (0 or 1 to skip) and its duration. */
const DIAG_ROTATE = Number(process.env.BENCH_DIAG_ROTATE ?? 10)
const DIAG_DURATION_S = Number(process.env.BENCH_DIAG_DURATION ?? 5)
const BODY = JSON.stringify({ input: 'hello' })
const HEADERS = { 'content-type': 'application/json' }

const TARGET_THROUGHPUT_RATIO = 0.4
const TARGET_P99_RATIO = 3

async function cannon(opts: {
  server: ServerChild
  url: string
  duration: number
  setupClient?: (c: AutocannonClient) => void
}): Promise<Load> {
  return runLoad(opts.server, {
    url: opts.url,
    connections: CONNECTIONS,
    duration: opts.duration,
    method: 'POST',
    headers: HEADERS,
    body: BODY,
    ...(opts.setupClient ? { setupClient: opts.setupClient } : {}),
  })
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

/**
 * Sessions per connection: the n-th client autocannon creates cycles over its own `per`
 * sessions (sessions[n*per … n*per+per-1]); with pipelining 1 no two turns ever share a session.
 */
function perConnectionSessions(sessions: string[], per = 1): (c: AutocannonClient) => void {
  let next = 0
  return (client) => {
    const mine = sessions.slice(next, next + per)
    next += per
    if (mine.length < per) throw new Error(`more autocannon connections than sessions (${sessions.length} for ${per} each)`)
    client.setRequests(mine.map((id) => ({ method: 'POST', path: `/v1/sessions/${id}/turns`, headers: HEADERS, body: BODY })))
  }
}

function checkClean(label: string, l: Load): void {
  if (l.non2xx > 0 || l.errors > 0) {
    console.error(
      `  ${label}: ${l.non2xx} non-2xx responses, ${l.errors} errors (${l.timeouts} timeouts); status codes ${JSON.stringify(l.statusCodes)}`,
    )
  }
}

/** The baseline phase: a hello-world fastify app in its own child process, warmed up, then measured. */
async function helloPhase(log: (s: string) => void): Promise<Load> {
  const hello = await startServer('hello')
  try {
    log(`hello-world: warm-up ${WARMUP_S}s, then ${DURATION_S}s × ${CONNECTIONS} connections`)
    await cannon({ server: hello, url: `${hello.url}/hello`, duration: WARMUP_S })
    const l = await cannon({ server: hello, url: `${hello.url}/hello`, duration: DURATION_S })
    checkClean('hello-world', l)
    return l
  } finally {
    await hello.stop()
  }
}

/** The service phase: a turn per request, fresh sessions per connection; with `diag`, the rotating diagnostic after it. */
async function turnPhase(
  log: (s: string) => void,
  diag: boolean,
): Promise<{ load: Load; rotating: Load | null; sample: { status: number; body: any } }> {
  const burrow = await startServer('burrow', ENV)
  try {
    const [probe] = await createSessions(burrow.url, 1)
    const sample = await json(`${burrow.url}/v1/sessions/${probe}/turns`, { input: 'hello' })
    if (sample.status !== 200 || sample.body.status !== 'completed' || sample.body.output_text !== 'echo: hello') {
      throw new Error(`unexpected turn result ${sample.status} ${JSON.stringify(sample.body)}`)
    }
    // Fresh sessions for the measured run, so warm-up history does not make its turns heavier.
    const warmSessions = await createSessions(burrow.url, CONNECTIONS)
    const runSessions = await createSessions(burrow.url, CONNECTIONS)
    log(`turns: warm-up ${WARMUP_S}s, then ${DURATION_S}s × ${CONNECTIONS} connections (one session each)`)
    const warm = await cannon({ server: burrow, url: burrow.url, duration: WARMUP_S, setupClient: perConnectionSessions(warmSessions) })
    checkClean('turns (warm-up)', warm)
    const load = await cannon({ server: burrow, url: burrow.url, duration: DURATION_S, setupClient: perConnectionSessions(runSessions) })
    checkClean('turns', load)
    let rotating: Load | null = null
    if (diag && DIAG_ROTATE > 1) {
      // Diagnostic, not a target: the same load spread over DIAG_ROTATE× more sessions, so each
      // session's history (which every turn re-reads) stays DIAG_ROTATE× shorter.
      const many = await createSessions(burrow.url, CONNECTIONS * DIAG_ROTATE)
      log(`diagnostic: ${DIAG_DURATION_S}s × ${CONNECTIONS} connections rotating over ${DIAG_ROTATE} sessions each`)
      rotating = await cannon({
        server: burrow,
        url: burrow.url,
        duration: DIAG_DURATION_S,
        setupClient: perConnectionSessions(many, DIAG_ROTATE),
      })
      checkClean('turns (rotating)', rotating)
    }
    return { load, rotating, sample }
  } finally {
    await burrow.stop()
  }
}

export async function run(): Promise<BenchResult> {
  const t0 = performance.now()
  const log = (s: string) => console.log(`[turn-overhead] ${s}`)
  const hellos: Load[] = []
  const turns: Load[] = []
  let rotating: Load | null = null
  let sample: { status: number; body: any } | undefined
  for (let round = 0; round < ROUNDS; round++) {
    log(`round ${round + 1}/${ROUNDS}`)
    const last = round === ROUNDS - 1
    // The order alternates, so neither phase always runs first.
    if (round % 2 === 1) hellos.push(await helloPhase(log))
    const t = await turnPhase(log, last)
    turns.push(t.load)
    rotating = t.rotating ?? rotating
    sample = t.sample
    if (round % 2 === 0) hellos.push(await helloPhase(log))
  }
  const helloLoad = meanLoad(hellos)
  const turnLoad = meanLoad(turns)
  const throughputRatios = turns.map((l, i) => l.reqPerSec / hellos[i]!.reqPerSec)
  const p99Ratios = turns.map((l, i) => l.p99 / hellos[i]!.p99)
  const throughputRatio = median(throughputRatios)
  const p99Ratio = median(p99Ratios)
  const turnsPerSession = turnLoad.total / CONNECTIONS
  const bad = [...turns, ...hellos, ...(rotating ? [rotating] : [])].reduce((n, l) => n + l.non2xx + l.errors, 0)
  const targets = [
    target('turn throughput / hello-world throughput (median of per-round ratios)', throughputRatio, '>=', TARGET_THROUGHPUT_RATIO, '×'),
    target('turn p99 / hello-world p99 (median of per-round ratios)', p99Ratio, '<=', TARGET_P99_RATIO, '×'),
    target('non-2xx responses + errors (every run)', bad, '<=', 0, ''),
  ]
  const secs = (l: Load) => `${l.perSecond.slice(0, 1)[0] ?? '?'} → ${l.perSecond.slice(-1)[0] ?? '?'} req/s`
  const list = (xs: number[], digits = 2) => xs.map((x) => x.toFixed(digits)).join(' / ')
  const notes = [
    `Per round, requests/s — turns ${list(
      turns.map((l) => l.reqPerSec),
      0,
    )}; hello-world ${list(
      hellos.map((l) => l.reqPerSec),
      0,
    )}; ` +
      `each round's throughput ratio ${list(throughputRatios)}, p99 ratio ${list(p99Ratios)}; the targets take the medians (the mean of ` +
      `rounds: ${(turnLoad.reqPerSec / helloLoad.reqPerSec).toFixed(3)}×). The rounds exist because this shared VM's speed drifts between ` +
      'runs, and the hello-world baseline (the lighter of the two) moves the most.',
    `Status codes — turns: ${JSON.stringify(turnLoad.statusCodes)}; hello-world: ${JSON.stringify(helloLoad.statusCodes)}.`,
    `Server CPU (CPU time / wall time of the server process during the measured run): turns ${(turnLoad.serverCpu * 100).toFixed(0)} %, hello-world ${(helloLoad.serverCpu * 100).toFixed(0)} %. ` +
      'Below ~95 % means that server was not the bottleneck (the single autocannon process was).',
    `Throughput first → last second of the measured run: turns ${secs(turnLoad)}, hello-world ${secs(helloLoad)}. ` +
      `≈ ${turnsPerSession.toFixed(0)} turns per session by the end of the measured run.`,
    `Each turn answers with ${Buffer.byteLength(JSON.stringify(sample!.body))} bytes of JSON (the hello-world answer is 17).`,
  ]
  const metrics = [
    metric('requests/s (mean of rounds)', turnLoad.reqPerSec, 'req/s', helloLoad.reqPerSec),
    metric('latency p50', turnLoad.p50, 'ms', helloLoad.p50),
    metric('latency p90', turnLoad.p90, 'ms', helloLoad.p90),
    metric('latency p99', turnLoad.p99, 'ms', helloLoad.p99),
    metric('latency mean', turnLoad.mean, 'ms', helloLoad.mean),
    metric('responses (per round, mean)', turnLoad.total, '', helloLoad.total),
    metric('non-2xx responses', turnLoad.non2xx, '', helloLoad.non2xx),
    metric('errors (incl. timeouts)', turnLoad.errors, '', helloLoad.errors),
    metric('server CPU', turnLoad.serverCpu * 100, '%', helloLoad.serverCpu * 100),
  ]
  if (rotating) {
    metrics.push(
      metric(`diagnostic: requests/s, ${DIAG_ROTATE} sessions per connection`, rotating.reqPerSec, 'req/s', helloLoad.reqPerSec),
      metric(`diagnostic: latency p99, ${DIAG_ROTATE} sessions per connection`, rotating.p99, 'ms', helloLoad.p99),
    )
    notes.push(
      `Diagnostic run (${DIAG_DURATION_S}s, not a target): each connection rotating over ${DIAG_ROTATE} fresh sessions, so histories stay ` +
        `${DIAG_ROTATE}× shorter — ${rotating.reqPerSec.toFixed(0)} req/s (${secs(rotating)}), p99 ${rotating.p99} ms. ` +
        "The gap to the measured run is the part of a turn's cost that grows with the session's history.",
    )
  }
  return {
    name: 'turn-overhead',
    title: 'Turn overhead vs. a hello-world fastify route',
    description: [
      'autocannon (programmatic, one process) against `POST /v1/sessions/{id}/turns` with `{"input":"hello"}` on the',
      '`offline:echo` provider (deterministic, no network), and in the same run against a minimal fastify app answering',
      '`POST /hello` with `{"hello":"world"}` — same connections, duration, pipelining 1 and body. Each server runs alone in',
      'a child process. Every connection drives its own session (one turn per session at a time); the measured run uses',
      'fresh sessions, created after a warm-up run on other sessions. The two phases run in rounds, the order alternating; the',
      "targets take the median over the rounds of each round's ratio, the other figures are means over the rounds. Latency is",
      "autocannon's per-request response time (whole milliseconds).",
    ].join(' '),
    config: {
      connections: CONNECTIONS,
      'duration (s)': DURATION_S,
      'warm-up (s)': WARMUP_S,
      rounds: ROUNDS,
      pipelining: 1,
      'request body': BODY,
      model: 'offline:echo',
      capabilities: capabilitySummary(ENV),
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
