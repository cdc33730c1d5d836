/**
 * turn-queue: how soon a queued turn (`on_busy: "queue"`) starts once the turn before it has
 * ended, on the same replica (issue: p99 ≤ 5 ms).
 *
 * Each round creates a session (offline:echo, LMDB at fsync: the default build) and sends
 * QUEUED turn requests to it at once, every one with `on_busy: "queue"`: the first runs, the
 * others wait in line. Each turn's gap is measured from the end of the turn before it to its
 * own start:
 *
 * - **through the API** (the user's path): the real server in a child process, every request an
 *   SSE turn (`POST …/turns`, `Accept: text/event-stream`); the gap is from this client's receipt
 *   of turn k's `turn_completed` frame to its receipt of turn k+1's `turn_started` frame. Both are
 *   published only once durable; the slot passes on as turn k's last event is emitted, so turn
 *   k+1's first events usually join turn k's last commit (one fsync for both), and the gap holds
 *   the handoff and the delivery.
 * - **in process** (the part): the same service built in this process, `startTurn` called
 *   directly with `onEvent`; the gap is between the same two events as the service hands them
 *   to the callers, without HTTP.
 *
 *   npx tsx bench/turn-queue.bench.ts      (or: npx tsx bench/run.ts turn-queue)
 *   BENCH_ROUNDS=12 BENCH_QUEUED=17 to change the load.
 */
import { createParser } from 'eventsource-parser'
import { rmSync } from 'node:fs'
import { Agent, request } from 'undici'
import { appImport } from './lib/app.js'
import { startServer } from './lib/child.js'
import { burrowEnv, capabilitySummary } from './lib/env.js'
import { isMain, metric, percentile, target, type BenchResult } from './lib/types.js'

const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 12))
/** Requests per round, all sent at once: at most the line's bound (16) wait behind the first. */
const QUEUED = Math.min(17, Math.max(2, Number(process.env.BENCH_QUEUED ?? 17)))
const TARGET_P99_MS = 5
const ENV = { BURROW_SESSION_STORE: 'lmdb', BURROW_DURABILITY: 'fsync' }

type Stamp = { turn: number; started: number; completed: number }

/** Gaps (ms) from each turn's end to the next turn's start, by turn number. */
function gaps(stamps: Stamp[]): number[] {
  const byTurn = [...stamps].sort((a, b) => a.turn - b.turn)
  return byTurn.slice(1).map((s, i) => s.started - byTurn[i]!.completed)
}

const agent = new Agent({ connections: 64 })

/** One SSE turn: when its turn_started and turn_completed frames arrived here. */
async function sseTurn(url: string, id: string, input: string): Promise<Stamp> {
  const res = await request(`${url}/v1/sessions/${id}/turns`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ input, on_busy: 'queue' }),
    dispatcher: agent,
  })
  if (res.statusCode !== 200) throw new Error(`turn answered ${res.statusCode}: ${await res.body.text()}`)
  const stamp: Stamp = { turn: 0, started: NaN, completed: NaN }
  const parser = createParser({
    onEvent(m) {
      const now = performance.now()
      if (m.event === 'turn_started') {
        stamp.started = now
        stamp.turn = (JSON.parse(m.data) as { turn: number }).turn
      }
      if (m.event === 'turn_completed') stamp.completed = now
    },
  })
  for await (const chunk of res.body) parser.feed(chunk.toString())
  if (!Number.isFinite(stamp.started) || !Number.isFinite(stamp.completed)) throw new Error('a turn stream ended without its start or end')
  return stamp
}

async function apiRounds(): Promise<number[]> {
  const env = burrowEnv(ENV)
  const server = await startServer('burrow', env)
  const out: number[] = []
  try {
    for (let r = 0; r < ROUNDS + 1; r++) {
      const created = await request(`${server.url}/v1/sessions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'offline:echo' }),
        dispatcher: agent,
      })
      const { session_id } = (await created.body.json()) as { session_id: string }
      const stamps = await Promise.all(Array.from({ length: QUEUED }, (_, i) => sseTurn(server.url, session_id, `queued turn ${i}`)))
      if (r > 0) out.push(...gaps(stamps)) // round 0 warms up
    }
  } finally {
    await server.stop()
    rmSync(env.BURROW_DATA_DIR!, { recursive: true, force: true })
  }
  return out
}

async function inProcessRounds(): Promise<number[]> {
  const { createBurrow, loadConfig } = await appImport<typeof import('../src/app/library.js')>('app/library.js')
  const env = burrowEnv(ENV)
  const burrow = await createBurrow(loadConfig({ ...env, LOG_LEVEL: 'silent' }), { defaultMetrics: false })
  const out: number[] = []
  try {
    for (let r = 0; r < ROUNDS + 1; r++) {
      const ctx = { requestId: 'bench' }
      const { session_id } = await burrow.service.createSession({ model: 'offline:echo' }, ctx)
      const stamps = await Promise.all(
        Array.from({ length: QUEUED }, async (_, i) => {
          const stamp: Stamp = { turn: 0, started: NaN, completed: NaN }
          await burrow.service.startTurn(
            session_id,
            { input: `queued turn ${i}`, on_busy: 'queue' },
            {
              requestId: `bench-${i}`,
              onEvent: (e) => {
                if (e.type === 'turn_started') {
                  stamp.started = performance.now()
                  stamp.turn = e.turn
                }
                if (e.type === 'turn_completed') stamp.completed = performance.now()
              },
            },
          )
          return stamp
        }),
      )
      if (r > 0) out.push(...gaps(stamps))
    }
  } finally {
    await burrow.close()
    rmSync(env.BURROW_DATA_DIR!, { recursive: true, force: true })
  }
  return out
}

export async function run(): Promise<BenchResult> {
  const t0 = performance.now()
  const api = (await apiRounds()).sort((a, b) => a - b)
  const inProcess = (await inProcessRounds()).sort((a, b) => a - b)
  const p = (xs: number[], q: number) => percentile(xs, q)
  return {
    name: 'turn-queue',
    title: 'A queued turn starts right after the one before it',
    description:
      'Gap from the end of a turn to the start of the next one queued behind it (`on_busy: "queue"`), same replica: ' +
      'through the REST API (SSE frames received by the client) and in process (events handed to the callers).',
    config: { rounds: ROUNDS, 'requests per round': QUEUED, capabilities: capabilitySummary(burrowEnv(ENV)), durability: 'fsync' },
    metrics: [
      metric('API gap p50', p(api, 50), 'ms'),
      metric('API gap p99', p(api, 99), 'ms'),
      metric('API gap max', api.at(-1)!, 'ms'),
      metric('in-process gap p50', p(inProcess, 50), 'ms'),
      metric('in-process gap p99', p(inProcess, 99), 'ms'),
      metric('gaps measured (API / in process)', api.length, 'gaps', inProcess.length),
    ],
    targets: [target('queued turn start after the previous end, API p99', p(api, 99), '<=', TARGET_P99_MS, 'ms')],
    pass: p(api, 99) <= TARGET_P99_MS,
    notes: [
      "The slot passes to the next turn in line as a turn's last event is emitted, before that event is durable (each answer still waits for its own events): the queued turn's `turn_started` then usually joins the same group commit as the previous `turn_completed`, and both are published after one fsync. Before that change the gap held a second fsync of its own: p50 1.12 ms, p99 6.39 ms on this VM (2026-11-28, 00:31 UTC).",
      'The API gap is from the receipt of one SSE frame to the receipt of the next on another stream; the in-process gap is between the same two events as the service hands them to the callers, without HTTP.',
    ],
    date: new Date().toISOString(),
    durationSeconds: (performance.now() - t0) / 1000,
  }
}

if (isMain(import.meta.url)) console.log(JSON.stringify(await run(), null, 2))
