/**
 * shutdown-delivery: SIGTERM with turns in flight, many times over. Of the turns that finish
 * within the grace period, how many deliver their full answer to the client; of those that
 * outlive it, how many deliver their INTERRUPTED answer; and does the process exit 0.
 *
 * Each run starts the real server process (`dist/bin/server.js`, what `npm start` runs; the
 * sources through tsx with BENCH_APP=src) with the LMDB session store at fsync on a fresh data
 * directory, and the fake LLM server (test/helpers/fake-llm-server.ts: the OpenAI wire format on
 * loopback) as its provider. TURNS turns go in flight on their own sessions — REST JSON and REST
 * SSE alternating, one JSON-RPC and one MCP turn among them, JSON over kept-alive sockets — each
 * scripted to end at its own moment, spread (with per-run jitter) from just before the signal to
 * past the end of the grace period; two event subscribers listen. Then SIGTERM, and everything each
 * client received is collected (test/app/shutdown-scenario.ts, shared with the shutdown fault chapter).
 *
 * Which turns finished within the grace period is not guessed from the schedule: the server is
 * restarted on the same data and each session's log says it (`turn_completed`, or `turn_failed`
 * with reason `shutdown`). A finished turn counts as delivered when its client got a complete
 * answer with exactly the logged output; an interrupted one when its client got the INTERRUPTED answer.
 *
 *   npx tsx bench/shutdown-delivery.bench.ts      (or: npx tsx bench/run.ts shutdown-delivery)
 *   BENCH_RUNS=20 BENCH_TURNS=16 BENCH_GRACE_MS=1000 to change the load.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { request } from 'undici'
import { startFakeLlm, type FakeLlmServer } from '../test/helpers/fake-llm-server.js'
import { runShutdownScenario, type ShutdownRun, type TurnKind, type TurnPlan } from '../test/app/shutdown-scenario.js'
import { APP, ensureBuilt, REPO_ROOT } from './lib/app.js'
import { capabilitySummary } from './lib/env.js'
import { isMain, metric, percentile, target, type BenchResult } from './lib/types.js'

const RUNS = Math.max(1, Number(process.env.BENCH_RUNS ?? 20))
const TURNS = Math.max(4, Number(process.env.BENCH_TURNS ?? 16))
const GRACE_MS = Number(process.env.BENCH_GRACE_MS ?? 1_000)
/** Answers end from this long before the signal… */
const FIRST_FINISH_MS = -150
/** …to this long after the end of the grace period. */
const PAST_GRACE_MS = 300
const JITTER_MS = 40
const MODEL = 'openai:gpt-4o-mini'

const ENV: Record<string, string> = {
  HOST: '127.0.0.1',
  PORT: '0',
  LOG_LEVEL: 'info',
  BURROW_SESSION_STORE: 'lmdb',
  BURROW_DURABILITY: 'fsync',
  BURROW_MEMORY_STORE: 'off',
  BURROW_COMPACTION: 'off',
  BURROW_SHUTDOWN_GRACE_MS: String(GRACE_MS),
  OPENAI_API_KEY: 'k',
}

interface Server {
  child: ChildProcess
  url: string
  lines: any[]
  stderr: string[]
}

/** The real entry point in a child process; resolves on its start-up line (which carries the address). */
function startServer(env: Record<string, string>): Promise<Server> {
  const args = APP === 'src' ? ['--import', 'tsx', 'src/bin/server.ts'] : ['dist/bin/server.js']
  const child = spawn(process.execPath, args, { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  const lines: any[] = []
  const stderr: string[] = []
  child.stderr!.on('data', (d) => stderr.push(String(d)))
  let buf = ''
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      buf += d
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const line = buf.slice(0, i)
        buf = buf.slice(i + 1)
        try {
          const j = JSON.parse(line)
          lines.push(j)
          if (j.address) resolve({ child, url: j.address, lines, stderr })
        } catch {
          /* not a log line */
        }
      }
    })
    child.once('exit', (code, signal) => reject(new Error(`server exited before listening (${code ?? signal}): ${stderr.join('')}`)))
  })
}

async function stopServer(s: Server): Promise<void> {
  if (s.child.exitCode !== null || s.child.signalCode !== null) return
  const exited = once(s.child, 'exit')
  s.child.kill('SIGTERM')
  const t = setTimeout(() => s.child.kill('SIGKILL'), 15_000)
  await exited
  clearTimeout(t)
}

/** A deterministic PRNG, so every run of the benchmark schedules the same turns. */
function prng(seed: number): () => number {
  let s = seed
  return () => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31
}

function kindOf(i: number): TurnKind {
  if (i % 8 === 6) return 'rpc'
  if (i % 8 === 7) return 'mcp'
  return i % 2 === 0 ? 'json' : 'sse'
}

/** TURNS turns whose answers end evenly spread over [FIRST_FINISH_MS, grace + PAST_GRACE_MS], each jittered; answer lengths vary. */
function planFor(run: number): TurnPlan[] {
  const rnd = prng(run + 1)
  const span = GRACE_MS + PAST_GRACE_MS - FIRST_FINISH_MS
  return Array.from({ length: TURNS }, (_, i) => ({
    kind: kindOf(i),
    finishAt: Math.round(FIRST_FINISH_MS + (i * span) / (TURNS - 1) + (rnd() * 2 - 1) * JITTER_MS),
    size: Math.round(20 + rnd() ** 3 * 200_000),
  }))
}

type Verdict =
  'finished-delivered' | 'finished-lost' | 'interrupted-delivered' | 'interrupted-lost' | 'acknowledged-not-logged' | 'not-closed'

/** What the log says of each turn (after a restart), against what its client got. */
async function judgeRun(url: string, run: ShutdownRun): Promise<Verdict[]> {
  const out: Verdict[] = []
  for (const r of run.turns) {
    const res = await request(`${url}/v1/sessions/${r.sessionId}/event-log?after=0&limit=1000`)
    const page = (await res.body.json()) as { events: Array<{ type: string; turn: number; data: any }> }
    if (res.statusCode !== 200) throw new Error(`event-log ${r.sessionId}: ${res.statusCode}`)
    const end = page.events.find((e) => e.turn === 1 && (e.type === 'turn_completed' || e.type === 'turn_failed'))
    if (end?.type === 'turn_completed') {
      out.push(
        r.outcome === 'completed' && r.outputText === end.data.output_text && r.outputText === r.text
          ? 'finished-delivered'
          : 'finished-lost',
      )
    } else if (end?.type === 'turn_failed' && end.data.reason === 'shutdown') {
      out.push(r.outcome === 'interrupted' && r.reason === 'shutdown' ? 'interrupted-delivered' : 'interrupted-lost')
    } else {
      out.push(r.outcome === 'completed' ? 'acknowledged-not-logged' : 'not-closed')
    }
  }
  return out
}

interface RunRecord {
  verdicts: Verdict[]
  exitCode: number | null
  timedOut: boolean
  exitMs: number
  drain: { in_flight?: number; forced?: boolean; cut?: number; ms?: number } | undefined
  subscribersClosed: number
  subscribers: number
  inFlightAtSignal: number
  firstProblem: string | null
}

async function oneRun(i: number, fake: FakeLlmServer): Promise<RunRecord> {
  const dataDir = mkdtempSync(join(tmpdir(), 'burrow-bench-shutdown-'))
  try {
    const env = { ...ENV, BURROW_DATA_DIR: dataDir, OPENAI_BASE_URL: `${fake.url}/v1` }
    const server = await startServer(env)
    const plan = planFor(i)
    let run: ShutdownRun
    try {
      run = await runShutdownScenario({
        url: server.url,
        child: server.child,
        fake,
        model: MODEL,
        plan,
        subscribers: true,
        exitTimeoutMs: GRACE_MS + 20_000,
      })
    } finally {
      await stopServer(server)
    }
    const again = await startServer(env)
    let verdicts: Verdict[]
    try {
      verdicts = await judgeRun(again.url, run)
    } finally {
      await stopServer(again)
    }
    const bad = run.turns.findIndex((_, k) => !verdicts[k]!.endsWith('-delivered'))
    return {
      verdicts,
      exitCode: run.exitCode,
      timedOut: run.timedOut,
      exitMs: run.exitMs,
      drain: server.lines.find((l) => l.msg === 'http drained'),
      subscribers: run.subscribers.length,
      subscribersClosed: run.subscribers.filter(
        (s) => s.error === null && s.frames.at(-1)?.event === 'stream_closed' && s.frames.at(-1)?.data?.data?.reason === 'shutdown',
      ).length,
      inFlightAtSignal: plan.filter((p) => p.finishAt === null || p.finishAt > 0).length,
      firstProblem:
        bad < 0 ? null : `run ${i + 1}, turn #${bad} over ${run.turns[bad]!.kind}: ${verdicts[bad]} (${run.turns[bad]!.detail})`,
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

export async function run(): Promise<BenchResult> {
  const t0 = performance.now()
  const log = (s: string) => console.log(`[shutdown-delivery] ${s}`)
  ensureBuilt()
  const fake = await startFakeLlm({ openaiKey: 'k' })
  const runs: RunRecord[] = []
  try {
    for (let i = 0; i < RUNS; i++) {
      const r = await oneRun(i, fake)
      runs.push(r)
      const count = (v: Verdict) => r.verdicts.filter((x) => x === v).length
      log(
        `run ${i + 1}/${RUNS}: finished ${count('finished-delivered')}/${count('finished-delivered') + count('finished-lost')} delivered, ` +
          `interrupted ${count('interrupted-delivered')}/${count('interrupted-delivered') + count('interrupted-lost')} delivered, ` +
          `exit ${r.timedOut ? 'timed out' : r.exitCode} after ${r.exitMs.toFixed(0)} ms` +
          (r.firstProblem ? `; ${r.firstProblem}` : ''),
      )
    }
  } finally {
    await fake.close()
  }

  const all = runs.flatMap((r) => r.verdicts)
  const n = (v: Verdict) => all.filter((x) => x === v).length
  const finished = n('finished-delivered') + n('finished-lost')
  const interrupted = n('interrupted-delivered') + n('interrupted-lost')
  const pct = (a: number, b: number) => (b === 0 ? NaN : (100 * a) / b)
  const badExits = runs.filter((r) => r.timedOut || r.exitCode !== 0).length
  const exitMs = runs.map((r) => r.exitMs).sort((a, b) => a - b)
  const drainMs = runs
    .map((r) => r.drain?.ms ?? NaN)
    .filter(Number.isFinite)
    .sort((a, b) => a - b)
  const subs = runs.reduce((a, r) => a + r.subscribers, 0)
  const subsClosed = runs.reduce((a, r) => a + r.subscribersClosed, 0)
  const forced = runs.filter((r) => r.drain?.forced !== false).length
  const unlogged = n('acknowledged-not-logged') + n('not-closed')

  const targets = [
    target(
      'turns finished within the grace period whose full answer was delivered',
      pct(n('finished-delivered'), finished),
      '>=',
      100,
      '%',
    ),
    target(
      'turns interrupted at the end of the grace period whose INTERRUPTED answer was delivered',
      pct(n('interrupted-delivered'), interrupted),
      '>=',
      100,
      '%',
    ),
    target('runs with a non-zero exit (or no exit)', badExits, '<=', 0, ''),
    target('runs with turns in flight at SIGTERM', runs.filter((r) => r.inFlightAtSignal > 0).length, '>=', 20, ''),
  ]
  const metrics = [
    metric(
      'full answers delivered (baseline: turns finished within the grace period, from the log)',
      n('finished-delivered'),
      'turns',
      finished,
    ),
    metric('INTERRUPTED answers delivered (baseline: turns interrupted, from the log)', n('interrupted-delivered'), 'turns', interrupted),
    metric('subscriber streams ending with stream_closed (shutdown) (baseline: subscribers)', subsClosed, 'streams', subs),
    metric('answers acknowledged but not in the log, or turns left open', unlogged, 'turns'),
    metric('runs whose drain hit its deadline (connections destroyed)', forced, 'runs'),
    metric('SIGTERM → exit, median', percentile(exitMs, 50), 'ms'),
    metric('SIGTERM → exit, max', exitMs.at(-1) ?? NaN, 'ms'),
    metric('HTTP drain (from the end of the turns), median', percentile(drainMs, 50), 'ms'),
    metric('HTTP drain, max', drainMs.at(-1) ?? NaN, 'ms'),
  ]
  const problems = runs.map((r) => r.firstProblem).filter(Boolean)
  const notes = [
    `${RUNS} runs × ${TURNS} turns = ${all.length} turns; per run ${Math.round(runs.reduce((a, r) => a + r.inFlightAtSignal, 0) / RUNS)} on average were still running at SIGTERM. ` +
      `${finished} finished within the grace period, ${interrupted} were interrupted at its end.`,
    `Exit codes: ${JSON.stringify(
      runs.reduce<Record<string, number>>((m, r) => {
        const k = r.timedOut ? 'timed out' : String(r.exitCode)
        m[k] = (m[k] ?? 0) + 1
        return m
      }, {}),
    )}.`,
    'SIGTERM → exit includes the grace period (turns still running at its end are interrupted) and closing the LMDB environment; ' +
      'the drain is what follows the turns: answers flushed, kept-alive sockets closed.',
    problems.length ? `First problems: ${problems.slice(0, 3).join('; ')}.` : 'No turn lost its answer.',
  ]
  return {
    name: 'shutdown-delivery',
    title: 'Shutdown: answers of turns in flight delivered across SIGTERM',
    description: [
      `${RUNS} runs; each starts the real server process (\`${APP === 'src' ? 'src/bin/server.ts' : 'dist/bin/server.js'}\`, LMDB at fsync, fresh data directory)`,
      `against the fake LLM on loopback, puts ${TURNS} turns in flight on their own sessions (REST JSON over kept-alive sockets and REST SSE`,
      'alternating, one JSON-RPC and one MCP turn among them, answers of 20 B to 200 kB) with two event subscribers, each answer scripted to',
      `end at its own moment from ${-FIRST_FINISH_MS} ms before SIGTERM to ${PAST_GRACE_MS} ms after the ${GRACE_MS} ms grace period (±${JITTER_MS} ms jitter), then sends SIGTERM.`,
      'Which turns finished within the grace period is read from the log after a restart on the same data; a finished turn counts as',
      'delivered when its client got the complete answer with the logged output, an interrupted one when its client got INTERRUPTED',
      '(reason `shutdown`). The baseline column is the number of turns each answer is owed to.',
    ].join(' '),
    config: {
      runs: RUNS,
      'turns per run': TURNS,
      'grace period (ms)': GRACE_MS,
      'answers end (ms after SIGTERM)': `${FIRST_FINISH_MS} … ${GRACE_MS + PAST_GRACE_MS}`,
      durability: 'fsync',
      capabilities: capabilitySummary(ENV),
      model: `${MODEL} (fake LLM, OpenAI wire format)`,
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
