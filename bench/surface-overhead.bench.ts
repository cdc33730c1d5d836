/**
 * surface-overhead: what a turn costs through JSON-RPC (`POST /rpc`) and MCP (`POST /mcp`,
 * streamable HTTP, stateless) compared with REST (`POST /v1/sessions/{id}/turns`), all three
 * against one server child in the same run, with the same connections and duration.
 *
 * autocannon drives the `offline:echo` provider (no network, no model time); the server runs in
 * a child process (bench/lib/child.ts), this process only generates load. One turn may run per
 * session at a time, so every connection of every phase gets its own fresh session (setupClient),
 * pipelining is 1. RPC and MCP report failures inside HTTP 200 responses, so besides non-2xx
 * responses every body is checked (cheap string test on each, a full parse on a sample): any
 * non-2xx, error or bad body fails the benchmark.
 *
 * Phases run in rounds, the order reversed every other round (REST, RPC, MCP, MCP, RPC, REST, …),
 * so a drift over the run (heap growing with the sessions' histories, other load) weighs on every
 * surface alike. The verdict is the median over the rounds of each round's ratio to that round's
 * REST phase: on a shared 2-core VM single phases swing by ±30 % (CPU steal, the load generator
 * sharing the cores), and a paired, median figure is what stays put from run to run.
 *
 *   npx tsx bench/surface-overhead.bench.ts      (or: npx tsx bench/run.ts surface-overhead)
 *   BENCH_CONNECTIONS=100 BENCH_DURATION=5 BENCH_WARMUP=2 BENCH_ROUNDS=5 to change the load;
 *   BENCH_PIN=1 to put the server and the load generator on CPUs of their own (lib/child.ts);
 *   BENCH_ONLY=mcp (with BENCH_CPU_PROF=1) to run and profile one surface (no result).
 */
import type { AutocannonClient, AutocannonRequest } from 'autocannon'
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js'
import { burrowEnv, capabilitySummary } from './lib/env.js'
import { startServer, type ServerChild } from './lib/child.js'
import { runLoad, type Load as BaseLoad } from './lib/load.js'
import { isMain, median, metric, target, type BenchResult, type Metric } from './lib/types.js'

/** The service env for this benchmark (capability switches live in lib/env.ts BURROW_ENV). */
const ENV = burrowEnv({})

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 100)
const DURATION_S = Number(process.env.BENCH_DURATION ?? 5)
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 2)
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 5))
/** Every SAMPLE_EVERY-th response of a phase (and its first) is parsed in full; the others get a string test. */
const SAMPLE_EVERY = 50
const INPUT = 'hello'
const EXPECTED_OUTPUT = `echo: ${INPUT}`

const TARGET_THROUGHPUT_RATIO = 0.8

const SURFACES = ['rest', 'rpc', 'mcp'] as const
type Surface = (typeof SURFACES)[number]
const LABEL: Record<Surface, string> = { rest: 'REST', rpc: 'JSON-RPC', mcp: 'MCP' }

const JSON_HEADERS = { 'content-type': 'application/json' }
/** What an MCP streamable-HTTP client sends (the SDK client adds the protocol version after initialize). */
const MCP_HEADERS = { ...JSON_HEADERS, accept: 'application/json, text/event-stream', 'mcp-protocol-version': LATEST_PROTOCOL_VERSION }

/** How one turn on `sessionId` is asked for on each surface. */
function turnRequest(surface: Surface, sessionId: string): { path: string; headers: Record<string, string>; body: string } {
  switch (surface) {
    case 'rest':
      return { path: `/v1/sessions/${sessionId}/turns`, headers: JSON_HEADERS, body: JSON.stringify({ input: INPUT }) }
    case 'rpc':
      return {
        path: '/rpc',
        headers: JSON_HEADERS,
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'turn/start', params: { session_id: sessionId, input: INPUT } }),
      }
    case 'mcp':
      return {
        path: '/mcp',
        headers: MCP_HEADERS,
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'turn_run', arguments: { session_id: sessionId, input: INPUT } },
        }),
      }
  }
}

// ---- response checks -------------------------------------------------------------------

/** Cheap test of every 2xx body: a completed echo turn, and no error marker of the surface. */
function quickCheck(surface: Surface, body: string): boolean {
  if (!body.includes(`"output_text":"${EXPECTED_OUTPUT}"`) || !body.includes('"status":"completed"')) return false
  if (surface === 'rpc') return body.includes('"result":{') && !body.includes('"error":{')
  if (surface === 'mcp')
    return (
      body.startsWith('event: message\n') && body.includes('"result":{') && !body.includes('"isError":true') && !body.includes('"error":{')
    )
  return true
}

/** The data of each event of an SSE stream, parsed as JSON. */
function sseMessages(body: string): unknown[] {
  const out: unknown[] = []
  for (const event of body.split(/\r?\n\r?\n/)) {
    const data = event
      .split(/\r?\n/)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).replace(/^ /, ''))
    if (data.length) out.push(JSON.parse(data.join('\n')))
  }
  return out
}

/** Full check of a response body; returns why it is wrong, or null. */
function fullCheck(surface: Surface, body: string): string | null {
  const turnOk = (t: any) => t && typeof t === 'object' && t.status === 'completed' && t.output_text === EXPECTED_OUTPUT
  try {
    if (surface === 'rest') return turnOk(JSON.parse(body)) ? null : 'not a completed echo turn'
    if (surface === 'rpc') {
      const m = JSON.parse(body)
      if (m?.jsonrpc !== '2.0' || m.id !== 1) return 'not the JSON-RPC response to id 1'
      if (m.error !== undefined || m.result === undefined) return `JSON-RPC error ${JSON.stringify(m.error)}`
      return turnOk(m.result) ? null : 'result is not a completed echo turn'
    }
    const msgs = sseMessages(body) as any[]
    const m = msgs.find((x) => x?.jsonrpc === '2.0' && x.id === 1 && ('result' in x || 'error' in x))
    if (!m) return `no JSON-RPC response to id 1 in ${msgs.length} SSE message(s)`
    if (m.error !== undefined || m.result === undefined) return `JSON-RPC error ${JSON.stringify(m.error)}`
    if (m.result.isError) return `tool error ${JSON.stringify(m.result.structuredContent ?? m.result.content)}`
    if (!Array.isArray(m.result.content) || m.result.content[0]?.text !== EXPECTED_OUTPUT) return 'tool text is not the echo'
    return turnOk(m.result.structuredContent) ? null : 'structuredContent is not a completed echo turn'
  } catch (err) {
    return `unparsable body (${err instanceof Error ? err.message : String(err)})`
  }
}

/** Body checks over one phase. */
interface Checks {
  seen: number
  sampled: number
  bad: number
  firstBad: string | null
  bytes: number
}

function checker(surface: Surface, checks: Checks) {
  return (status: number, body: string) => {
    if (status < 200 || status > 299) return // counted by autocannon as non-2xx
    const n = checks.seen++
    if (n === 0) checks.bytes = Buffer.byteLength(body)
    let why: string | null = quickCheck(surface, body) ? null : 'failed the quick check'
    if (n % SAMPLE_EVERY === 0 || why) {
      checks.sampled++
      why = fullCheck(surface, body) ?? why
    }
    if (why) {
      checks.bad++
      checks.firstBad ??= `${why}: ${body.length > 400 ? `${body.slice(0, 400)}…` : body}`
    }
  }
}

// ---- load ------------------------------------------------------------------------------

/** One run of a surface: the shared load figures, and the answers' checks. */
interface Load extends BaseLoad {
  surface: Surface
  round: number
  checks: Checks
}

type CheckedRequest = AutocannonRequest & { onResponse: (status: number, body: string) => void }

/** The n-th autocannon client drives sessions[n] only, so no two turns ever share a session. */
function perConnectionSession(
  surface: Surface,
  sessions: string[],
  onResponse: CheckedRequest['onResponse'],
): (c: AutocannonClient) => void {
  let next = 0
  return (client) => {
    const id = sessions[next++]
    if (id === undefined) throw new Error(`more autocannon connections than sessions (${sessions.length})`)
    const req: CheckedRequest = { method: 'POST', ...turnRequest(surface, id), onResponse }
    client.setRequests([req])
  }
}

async function cannon(server: ServerChild, surface: Surface, round: number, duration: number, sessions: string[]): Promise<Load> {
  const checks: Checks = { seen: 0, sampled: 0, bad: 0, firstBad: null, bytes: 0 }
  const first = turnRequest(surface, sessions[0]!)
  const load = await runLoad(server, {
    url: server.url + first.path,
    connections: CONNECTIONS,
    duration,
    method: 'POST',
    headers: first.headers,
    body: first.body,
    setupClient: perConnectionSession(surface, sessions, checker(surface, checks)),
  })
  return { surface, round, ...load, checks }
}

async function json(url: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(url, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(body) })
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

/** One turn per surface with fetch, fully checked, before any load (MCP: stateless, no initialize first). */
async function probe(base: string, surface: Surface): Promise<number> {
  const [id] = await createSessions(base, 1)
  const req = turnRequest(surface, id!)
  const res = await fetch(base + req.path, { method: 'POST', headers: req.headers, body: req.body })
  const body = await res.text()
  const why =
    res.status !== 200 ? `HTTP ${res.status}` : (fullCheck(surface, body) ?? (quickCheck(surface, body) ? null : 'failed the quick check'))
  if (why) throw new Error(`${LABEL[surface]} probe: ${why}: ${body}`)
  return Buffer.byteLength(body)
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length
const faults = (l: Load) => l.non2xx + l.errors + l.checks.bad

function describe(l: Load): string {
  const f = faults(l)
  return (
    `${l.reqPerSec.toFixed(0)} req/s, p50 ${l.p50} ms, p99 ${l.p99} ms, server CPU ${(l.serverCpu * 100).toFixed(0)} %, ` +
    `${l.checks.seen} bodies checked (${l.checks.sampled} parsed)` +
    (f > 0
      ? `; ${l.non2xx} non-2xx, ${l.errors} errors, ${l.checks.bad} bad bodies ${JSON.stringify(l.statusCodes)}${l.checks.firstBad ? ` — first: ${l.checks.firstBad}` : ''}`
      : '')
  )
}

export async function run(): Promise<BenchResult> {
  const t0 = performance.now()
  const log = (s: string) => console.log(`[surface-overhead] ${s}`)
  const only = process.env.BENCH_ONLY as Surface | undefined
  if (only !== undefined && !SURFACES.includes(only)) throw new Error(`BENCH_ONLY must be one of ${SURFACES.join(', ')}`)
  const surfaces = SURFACES.filter((s) => !only || s === only)

  const loads: Load[] = []
  const warmLoads: Load[] = []
  const probeBytes = {} as Record<Surface, number>
  const server = await startServer('burrow', ENV)
  try {
    for (const s of surfaces) probeBytes[s] = await probe(server.url, s)
    log(
      `warm-up: ${WARMUP_S}s per surface; then ${ROUNDS} round(s) of ${DURATION_S}s per surface × ${CONNECTIONS} connections (fresh sessions each)`,
    )
    for (const s of surfaces) {
      const warm = await cannon(server, s, -1, WARMUP_S, await createSessions(server.url, CONNECTIONS))
      warmLoads.push(warm)
      log(`  warm-up ${LABEL[s]}: ${describe(warm)}`)
    }
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? surfaces : [...surfaces].reverse()
      for (const s of order) {
        // Fresh sessions for every phase, so no phase's turns carry another phase's history.
        const sessions = await createSessions(server.url, CONNECTIONS)
        const l = await cannon(server, s, round, DURATION_S, sessions)
        loads.push(l)
        log(`  round ${round + 1} ${LABEL[s]}: ${describe(l)}`)
      }
    }
  } finally {
    await server.stop()
  }

  if (only) throw new Error(`BENCH_ONLY=${only}: diagnostic run, no result`)

  const of = (s: Surface) => loads.filter((l) => l.surface === s)
  const avg = (s: Surface, pick: (l: Load) => number) => mean(of(s).map(pick))
  const rps = (s: Surface) => avg(s, (l) => l.reqPerSec)
  // Each round's throughput over the same round's REST throughput; the verdict is their median.
  const roundRatios = (s: Surface) => of(s).map((l) => l.reqPerSec / of('rest').find((r) => r.round === l.round)!.reqPerSec)
  const rpcRatio = median(roundRatios('rpc'))
  const mcpRatio = median(roundRatios('mcp'))
  const bad = [...loads, ...warmLoads].reduce((n, l) => n + faults(l), 0)
  const targets = [
    target('JSON-RPC throughput / REST throughput (median of per-round ratios)', rpcRatio, '>=', TARGET_THROUGHPUT_RATIO, '×'),
    target('MCP throughput / REST throughput (median of per-round ratios)', mcpRatio, '>=', TARGET_THROUGHPUT_RATIO, '×'),
    target('non-2xx responses + errors + bad bodies (every run, warm-up included)', bad, '<=', 0, ''),
  ]

  const vsRest = (name: string, pick: (l: Load) => number, unit: string): Metric[] => [
    metric(`JSON-RPC: ${name}`, avg('rpc', pick), unit, avg('rest', pick)),
    metric(`MCP: ${name}`, avg('mcp', pick), unit, avg('rest', pick)),
  ]
  const sum = (s: Surface, pick: (l: Load) => number) => of(s).reduce((n, l) => n + pick(l), 0)
  const metrics = [
    ...vsRest('requests/s (mean of rounds)', (l) => l.reqPerSec, 'req/s'),
    ...vsRest('latency p50', (l) => l.p50, 'ms'),
    ...vsRest('latency p90', (l) => l.p90, 'ms'),
    ...vsRest('latency p99', (l) => l.p99, 'ms'),
    ...vsRest('latency mean', (l) => l.mean, 'ms'),
    ...vsRest('server CPU', (l) => l.serverCpu * 100, '%'),
    // CPU time per turn does not count time the VM took away (steal), so it varies less than throughput between runs.
    ...vsRest('server CPU per turn', (l) => (l.serverCpu * 1e6) / l.reqPerSec, 'µs'),
    metric(
      'JSON-RPC: responses (all rounds)',
      sum('rpc', (l) => l.total),
      '',
      sum('rest', (l) => l.total),
    ),
    metric(
      'MCP: responses (all rounds)',
      sum('mcp', (l) => l.total),
      '',
      sum('rest', (l) => l.total),
    ),
    metric('JSON-RPC: response bytes', probeBytes.rpc, 'B', probeBytes.rest),
    metric('MCP: response bytes', probeBytes.mcp, 'B', probeBytes.rest),
  ]

  const fmtRound = (l: Load) => `${l.reqPerSec.toFixed(0)}`
  const spread = (xs: number[]) => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}×`
  const notes = [
    `Requests/s per round (round order ${surfaces.map((s) => LABEL[s]).join(' → ')}, reversed every other round): ` +
      SURFACES.map((s) => `${LABEL[s]} ${of(s).map(fmtRound).join(' / ')}`).join('; ') +
      '. ' +
      `Each round's throughput over that round's REST throughput: JSON-RPC ${roundRatios('rpc')
        .map((r) => r.toFixed(2))
        .join(' / ')} ` +
      `(${spread(roundRatios('rpc'))}), MCP ${roundRatios('mcp')
        .map((r) => r.toFixed(2))
        .join(' / ')} (${spread(roundRatios('mcp'))}); ` +
      `the targets take the median. The means over the rounds: JSON-RPC ${(rps('rpc') / rps('rest')).toFixed(3)}×, MCP ${(rps('mcp') / rps('rest')).toFixed(3)}×.`,
    "Latencies are the mean over the rounds of each round's autocannon percentile (whole milliseconds).",
    `Server CPU (CPU time / wall time of the server process during the measured runs): ` +
      SURFACES.map((s) => `${LABEL[s]} ${(avg(s, (l) => l.serverCpu) * 100).toFixed(0)} %`).join(', ') +
      '. Below ~95 % means the server was not the bottleneck (the single autocannon process was).',
    `Bodies checked: every 2xx body gets a string test (a completed \`${EXPECTED_OUTPUT}\` turn, no JSON-RPC error, no MCP ` +
      `\`isError\`), every ${SAMPLE_EVERY}th is parsed in full (MCP: the SSE stream's JSON-RPC response to id 1) — ` +
      SURFACES.map(
        (s) =>
          `${LABEL[s]} ${sum(s, (l) => l.checks.seen)} checked, ${sum(s, (l) => l.checks.sampled)} parsed, ${sum(s, (l) => l.checks.bad)} bad`,
      ).join('; ') +
      '.',
    `Status codes — ${SURFACES.map((s) => `${LABEL[s]}: ${JSON.stringify(of(s).map((l) => l.statusCodes))}`).join('; ')}.`,
    `≈ ${SURFACES.map((s) => `${LABEL[s]} ${(avg(s, (l) => l.total) / CONNECTIONS).toFixed(0)}`).join(', ')} turns per session by the end of a phase ` +
      "(fresh sessions per phase; a slower surface ends with shorter histories, which turn-overhead's rotating diagnostic shows matters little).",
    'MCP is stateless streamable HTTP: each `tools/call` POST goes without `initialize` (the stateless transport accepts it) ' +
      'and is answered as an SSE stream carrying the JSON-RPC response; one MCP server serves every POST through the ' +
      'multiplexing stateless transport (src/surfaces/mcp/mcp-http-transport.ts).',
    `CPU placement: ${process.env.BENCH_PIN === '1' ? 'BENCH_PIN=1, the server on the last CPU, the load generator on the others' : 'not pinned (server and load generator share the CPUs)'}.`,
  ]
  for (const l of [...warmLoads, ...loads]) {
    if (l.checks.firstBad)
      notes.push(
        `First bad ${LABEL[l.surface]} body (${l.round < 0 ? 'warm-up' : `round ${l.round + 1}`}): \`${l.checks.firstBad.replace(/`/g, "'")}\``,
      )
  }

  return {
    name: 'surface-overhead',
    title: 'Surface overhead: JSON-RPC and MCP turns vs. REST',
    description: [
      'autocannon (programmatic, one process) against one Burrow server in a child process, `offline:echo` provider',
      '(deterministic, no network), in the same run: REST `POST /v1/sessions/{id}/turns` with `{"input":"hello"}` (the',
      'baseline), JSON-RPC `POST /rpc` `turn/start` with `{session_id, input}`, and MCP `POST /mcp` (streamable HTTP,',
      'stateless) `tools/call` of `turn_run` with `{session_id, input}` (`Accept: application/json, text/event-stream`).',
      'Same connections, duration and pipelining 1 for all three; every connection drives its own fresh session in each',
      'phase. After a warm-up of each surface the phases run in rounds, the order reversed every other round; the',
      "throughput targets take the median over the rounds of each round's ratio to the same round's REST phase, the",
      "other figures are means over the rounds. Latency is autocannon's per-request response time (whole milliseconds).",
    ].join(' '),
    config: {
      connections: CONNECTIONS,
      'duration per phase (s)': DURATION_S,
      'warm-up per surface (s)': WARMUP_S,
      rounds: ROUNDS,
      pipelining: 1,
      model: 'offline:echo',
      capabilities: capabilitySummary(ENV),
      'REST request': `POST /v1/sessions/{id}/turns ${turnRequest('rest', '{id}').body}`,
      'JSON-RPC request': `POST /rpc ${turnRequest('rpc', '{id}').body}`,
      'MCP request': `POST /mcp ${turnRequest('mcp', '{id}').body}`,
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
