/**
 * store-append: event append throughput through `LmdbSessionRepository.commit()` versus raw
 * lmdb puts of the same events, in the same run, at `fsync` and at `relaxed` durability.
 *
 * The workload is what the service does: SESSIONS sessions commit concurrently, each one
 * commit at a time (a session's seqs are gapless, so its commits are sequential), every commit
 * being one complete turn's events (turn_started, assistant_message, turn_completed) with the
 * snapshot they produce — built before timing by `SessionLog` (test/contract/fixtures.ts)
 * through the real reducer. The raw baseline writes the same events, grouped the same way
 * (one `childTransaction` of `events.put([sid, seq], event)` per commit, awaited, then at fsync
 * the flush of that transaction, taken inside it — exactly how the store waits), into a fresh
 * environment opened by the same `openLmdbEnv` (same options). Every measured run gets a fresh temp directory;
 * store and raw runs alternate, REPS times each; figures are over all runs.
 *
 * Diagnostic (not a target): the service's actual commit pattern — a turn as three commits of
 * one event each (as the turn runner emits them) — store vs raw, at relaxed.
 *
 *   npx tsx bench/store-append.bench.ts      (or: npx tsx bench/run.ts store-append)
 *   BENCH_SESSIONS=64 BENCH_TURNS=20 BENCH_FSYNC_PER_LANE=20 BENCH_RELAXED_PER_LANE=40 BENCH_REPS=2 to change the load.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { EventEnvelope } from '../src/core/events.js'
import type { SessionRecord } from '../src/core/session-record.js'
import { config, SessionLog, sessionId } from '../test/contract/fixtures.js'
import { appImport } from './lib/app.js'
import { isMain, metric, percentile, target, type BenchResult } from './lib/types.js'

const { openLmdbEnv } = await appImport<typeof import('../src/store/lmdb-env.js')>('store/lmdb-env.js')
const { LmdbSessionRepository } =
  await appImport<typeof import('../src/store/lmdb-session-repository.js')>('store/lmdb-session-repository.js')

/** Concurrent writers (each one session at a time): the sessions committing at once. */
const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 64)
/** Timed turn commits per session (after its untimed session_created commit). */
const TURNS = Number(process.env.BENCH_TURNS ?? 20)
/** Sessions each writer drives one after another, at fsync and at relaxed (relaxed is faster: more work to time). */
const FSYNC_PER_LANE = Number(process.env.BENCH_FSYNC_PER_LANE ?? 20)
const RELAXED_PER_LANE = Number(process.env.BENCH_RELAXED_PER_LANE ?? 40)
/** Sessions per writer in the diagnostic (three commits per turn). */
const SPLIT_PER_LANE = Number(process.env.BENCH_SPLIT_PER_LANE ?? 8)
const REPS = Number(process.env.BENCH_REPS ?? 2)
const IDEMPOTENCY_TTL_MS = 24 * 3_600_000

const TARGET_RATIO = 0.5

type Durability = 'fsync' | 'relaxed'
interface Commit {
  events: EventEnvelope[]
  record: SessionRecord
}
/** What one concurrent writer does: the sessions it drives one after another, each a create commit (untimed) and turn commits (timed). */
interface Lane {
  sessions: Array<{ create: Commit; turns: Commit[] }>
}

interface Run {
  seconds: number
  commits: number
  events: number
  latency: Float64Array
  cpuUs: number
  bytes: number
}
interface Summary {
  eventsPerSec: number
  commitsPerSec: number
  p50: number
  p99: number
  cpuUsPerCommit: number
}

let nextSession = 0
const QUESTION = 'lorem ipsum dolor sit amet '.repeat(2)

/**
 * `lanes` concurrent writers, each driving `perLane` sessions of `turns` turns, built by SessionLog
 * through the real reducer: one commit per turn, or (`split`) three — turn_started, assistant_message,
 * turn_completed — as the turn runner commits them.
 */
function workload(lanes: number, perLane: number, turns: number, split = false): Lane[] {
  const out: Lane[] = []
  for (let l = 0; l < lanes; l++) {
    const sessions: Lane['sessions'] = []
    for (let k = 0; k < perLane; k++) {
      const n = nextSession++
      const log = new SessionLog(sessionId(n), config(`tenant-${n % 4}`))
      const create = log.create()
      const commits: Commit[] = []
      for (let t = 0; t < turns; t++) {
        const text = `question ${t} in session ${n}: ${QUESTION}`
        if (!split) {
          commits.push(log.turn(text))
          continue
        }
        const turn = t + 1
        commits.push(log.add(turn, { type: 'turn_started', data: { input: [{ type: 'text', text }], continuation: false } }))
        commits.push(
          log.add(turn, {
            type: 'assistant_message',
            data: {
              message: { role: 'assistant', content: [{ type: 'text', text: `echo: ${text}` }] },
              usage: { input_tokens: 10, output_tokens: 3 },
              stop_reason: 'end_turn',
              model: 'offline:echo',
              step: 1,
              client_tool_call_ids: [],
            },
          }),
        )
        commits.push(
          log.add(turn, {
            type: 'turn_completed',
            data: { output_text: `echo: ${text}`, usage: { input_tokens: 10, output_tokens: 3 }, stop_reason: 'end_turn' },
          }),
        )
      }
      share(commits, log.record!)
      sessions.push({ create, turns: commits })
    }
    out.push({ sessions })
  }
  return out
}

/**
 * SessionLog hands out a deep copy of the record per commit (O(turns²) objects per session). The
 * messages and the finished turns' usage entries of commit k are equal to the final record's first
 * ones (no compaction here), so those copies are replaced by shared references: same content, a
 * fraction of the memory.
 */
function share(commits: Commit[], final: SessionRecord): void {
  for (const c of commits) {
    const r = c.record
    const same =
      r.messages.length <= final.messages.length &&
      JSON.stringify(r.messages.at(-1)) === JSON.stringify(final.messages[r.messages.length - 1])
    if (!same) throw new Error(`record of ${r.session_id} at seq ${r.last_seq} is not a prefix of the final record`)
    r.messages = final.messages.slice(0, r.messages.length)
    // the last entry (the current turn's) may still change within the turn: keep the record's own
    const own = r.usage_by_turn.at(-1)
    r.usage_by_turn = own ? [...final.usage_by_turn.slice(0, r.usage_by_turn.length - 1), own] : []
  }
}

const freshDir = (kind: string) => mkdtempSync(join(tmpdir(), `burrow-bench-${kind}-`))

/** Creates every session (untimed), then runs every lane concurrently, each committing its sessions' turns one after another. */
async function drive(lanes: Lane[], commit: (c: Commit) => Promise<void>): Promise<Omit<Run, 'bytes'>> {
  await Promise.all(
    lanes.map(async (l) => {
      for (const s of l.sessions) await commit(s.create)
    }),
  )
  let commits = 0
  let events = 0
  for (const l of lanes)
    for (const s of l.sessions)
      for (const c of s.turns) {
        commits++
        events += c.events.length
      }
  const latency = new Float64Array(commits)
  let k = 0
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  await Promise.all(
    lanes.map(async (l) => {
      for (const s of l.sessions) {
        for (const c of s.turns) {
          const t = performance.now()
          await commit(c)
          latency[k++] = performance.now() - t
        }
      }
    }),
  )
  const seconds = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  latency.sort()
  return { seconds, commits, events, latency, cpuUs: cpu.user + cpu.system }
}

async function storeRun(lanes: Lane[], durability: Durability): Promise<Run> {
  const dir = freshDir('store')
  try {
    const repo = await LmdbSessionRepository.open(dir, { durability, idempotencyTtlMs: IDEMPOTENCY_TTL_MS })
    try {
      const r = await drive(lanes, (c) => repo.commit(c.events, c.record))
      return { ...r, bytes: dbBytes(dir) }
    } finally {
      await repo.close()
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** The same events, the same grouping (one child transaction per commit), the same waits, nothing else. */
async function rawRun(
  lanes: Lane[],
  durability: Durability,
  grouping: 'child-transaction' | 'plain-puts' = 'child-transaction',
): Promise<Run> {
  const dir = freshDir('raw')
  try {
    const env = await openLmdbEnv(dir)
    const db = env.dbs.events
    try {
      const commit =
        grouping === 'child-transaction'
          ? async (c: Commit) => {
              let flushed: Promise<void> | undefined
              await db.childTransaction(() => {
                for (const e of c.events) db.put([e.session_id, e.seq], e)
                // The flush of this transaction (root.flushed taken later may be a later transaction's).
                if (durability === 'fsync') flushed = env.flushed()
              })
              await flushed
            }
          : async (c: Commit) => {
              await Promise.all(c.events.map((e) => db.put([e.session_id, e.seq], e)))
              if (durability === 'fsync') await env.flushed()
            }
      const r = await drive(lanes, commit)
      return { ...r, bytes: dbBytes(dir) }
    } finally {
      await env.close()
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** Size of the LMDB data file (`<dataDir>/lmdb/data.mdb`). */
function dbBytes(dir: string): number {
  try {
    return statSync(join(dir, 'lmdb', 'data.mdb')).size
  } catch {
    return NaN
  }
}

function summarise(runs: Run[]): Summary {
  const seconds = runs.reduce((a, r) => a + r.seconds, 0)
  const commits = runs.reduce((a, r) => a + r.commits, 0)
  const all = Float64Array.from(runs.flatMap((r) => [...r.latency])).sort()
  return {
    eventsPerSec: runs.reduce((a, r) => a + r.events, 0) / seconds,
    commitsPerSec: commits / seconds,
    p50: percentile(all, 50),
    p99: percentile(all, 99),
    cpuUsPerCommit: runs.reduce((a, r) => a + r.cpuUs, 0) / commits,
  }
}

export async function run(): Promise<BenchResult> {
  const t0 = performance.now()
  const log = (s: string) => console.log(`[store-append] ${s}`)

  const b0 = performance.now()
  const relaxedLanes = workload(SESSIONS, Math.max(FSYNC_PER_LANE, RELAXED_PER_LANE), TURNS)
  // fsync runs take each writer's first FSYNC_PER_LANE sessions (every run has a fresh directory)
  const fsyncLanes = relaxedLanes.map((l) => ({ sessions: l.sessions.slice(0, FSYNC_PER_LANE) }))
  relaxedLanes.forEach((l) => {
    l.sessions.length = RELAXED_PER_LANE
  })
  const splitLanes = workload(SESSIONS, SPLIT_PER_LANE, TURNS, true)
  const buildSeconds = (performance.now() - b0) / 1000
  const first = fsyncLanes[0]!.sessions[0]!.turns[0]!
  const eventsPerCommit = first.events.length
  const commitBytes = Buffer.byteLength(JSON.stringify(first.events))
  const built = SESSIONS * (Math.max(FSYNC_PER_LANE, RELAXED_PER_LANE) + SPLIT_PER_LANE)
  log(
    `pre-built ${built} sessions × ${TURNS} turns in ${buildSeconds.toFixed(1)} s (heap ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(0)} MiB)`,
  )

  // Warm-up (JIT, lmdb native paths), unmeasured: a short run of each kind.
  const warm = workload(16, 2, 10)
  await storeRun(warm, 'relaxed')
  await rawRun(warm, 'relaxed')

  const res: Record<Durability, { store: Run[]; raw: Run[]; plain: Run[] }> = {
    fsync: { store: [], raw: [], plain: [] },
    relaxed: { store: [], raw: [], plain: [] },
  }
  const eps = (r: Run) => (r.events / r.seconds).toFixed(0)
  for (const durability of ['fsync', 'relaxed'] as const) {
    const lanes = durability === 'fsync' ? fsyncLanes : relaxedLanes
    for (let i = 0; i < REPS; i++) {
      // alternate the order so drift (page cache, other load) does not favour one side
      for (const kind of i % 2 === 0 ? (['raw', 'store'] as const) : (['store', 'raw'] as const)) {
        const r = kind === 'store' ? await storeRun(lanes, durability) : await rawRun(lanes, durability)
        res[durability][kind].push(r)
        log(
          `${durability} ${kind}: ${r.commits} commits in ${r.seconds.toFixed(2)} s → ${eps(r)} events/s, p99 ${percentile(r.latency, 99).toFixed(1)} ms, ${(r.cpuUs / r.commits).toFixed(0)} µs CPU/commit`,
        )
      }
    }
    const p = await rawRun(lanes, durability, 'plain-puts')
    res[durability].plain.push(p)
    log(`${durability} raw plain puts (diagnostic): ${eps(p)} events/s`)
  }
  const splitRaw = await rawRun(splitLanes, 'relaxed')
  const splitStore = await storeRun(splitLanes, 'relaxed')
  log(`relaxed, three commits per turn (diagnostic): store ${eps(splitStore)} events/s, raw ${eps(splitRaw)} events/s`)

  const s = {
    fsync: { store: summarise(res.fsync.store), raw: summarise(res.fsync.raw), plain: summarise(res.fsync.plain) },
    relaxed: { store: summarise(res.relaxed.store), raw: summarise(res.relaxed.raw), plain: summarise(res.relaxed.plain) },
  }
  const split = { store: summarise([splitStore]), raw: summarise([splitRaw]) }
  const ratio = (d: Durability) => s[d].store.eventsPerSec / s[d].raw.eventsPerSec
  const targets = [
    target('store / raw events/s at fsync', ratio('fsync'), '>=', TARGET_RATIO, '×'),
    target('store / raw events/s at relaxed', ratio('relaxed'), '>=', TARGET_RATIO, '×'),
  ]
  const metrics = [
    ...(['fsync', 'relaxed'] as const).flatMap((d) => [
      metric(`${d}: events/s`, s[d].store.eventsPerSec, 'events/s', s[d].raw.eventsPerSec),
      metric(`${d}: commits/s`, s[d].store.commitsPerSec, 'commits/s', s[d].raw.commitsPerSec),
      metric(`${d}: commit latency p50`, s[d].store.p50, 'ms', s[d].raw.p50),
      metric(`${d}: commit latency p99`, s[d].store.p99, 'ms', s[d].raw.p99),
      metric(`${d}: CPU per commit (all threads)`, s[d].store.cpuUsPerCommit, 'µs', s[d].raw.cpuUsPerCommit),
      metric(
        `${d}: diagnostic — vs raw plain puts (no child transaction), events/s`,
        s[d].store.eventsPerSec,
        'events/s',
        s[d].plain.eventsPerSec,
      ),
    ]),
    metric(
      'diagnostic, relaxed, 3 commits per turn (1 event each): commits/s',
      split.store.commitsPerSec,
      'commits/s',
      split.raw.commitsPerSec,
    ),
    metric(
      'diagnostic, relaxed, 3 commits per turn: CPU per commit (all threads)',
      split.store.cpuUsPerCommit,
      'µs',
      split.raw.cpuUsPerCommit,
    ),
  ]
  const spread = (runs: Run[]) => runs.map(eps).join(', ')
  const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`
  const notes = [
    `Per-run events/s — fsync: store ${spread(res.fsync.store)}, raw ${spread(res.fsync.raw)}; relaxed: store ${spread(res.relaxed.store)}, raw ${spread(res.relaxed.raw)}.`,
    `Each commit carries ${eventsPerCommit} events (${commitBytes} bytes as JSON). The raw baseline writes those ${eventsPerCommit} records; the store ` +
      "writes one log row holding the events and the two messages they add (user + assistant), and the session's head (its scalar state and the " +
      'usage of its last 16 turns) — plus a usage row every 16 turns, the list/status indexes and the running-turn index when they change, and the ' +
      `projection's pending mark once until the projector catches up. Data file after one fsync run: store ${mib(res.fsync.store[0]!.bytes)}, raw ${mib(res.fsync.raw[0]!.bytes)}.`,
    `${SESSIONS} writers run concurrently; each drives its sessions one after another (${FSYNC_PER_LANE} at fsync, ${RELAXED_PER_LANE} at relaxed, ` +
      `${TURNS} turn commits each), so ${SESSIONS} sessions are committing at any moment and lmdb-js group-commits their child transactions. Every ` +
      `session is created (its \`session_created\` commit) before the clock starts. The workloads (${built} sessions) were built in ${buildSeconds.toFixed(1)} s before any timing.`,
    "CPU per commit is this process's user + system time over the timed run (main thread and lmdb-js's write thread) divided by commits.",
    `Diagnostic, the service's pattern (the turn runner commits turn_started, assistant_message and turn_completed separately): ${SESSIONS} writers × ` +
      `${SPLIT_PER_LANE} sessions × ${TURNS} turns × 3 commits at relaxed — store ${split.store.commitsPerSec.toFixed(0)} commits/s, raw ` +
      `${split.raw.commitsPerSec.toFixed(0)} commits/s (${(split.store.commitsPerSec / split.raw.commitsPerSec).toFixed(2)}×); each commit awaited before ` +
      'the next, so nothing coalesces, and with one event per commit the head written with it is the whole difference. (The service does not ' +
      "await its commits: a turn's events usually reach the store as one commit.) Single run each, not a target.",
    'Diagnostic rows "vs raw plain puts": the raw baseline with plain `put`s (lmdb-js batches them into the same write transaction, no child ' +
      'transaction per commit); the Burrow column repeats the store figure.',
  ]
  return {
    name: 'store-append',
    title: 'Store append throughput vs. raw LMDB puts',
    description: [
      `${SESSIONS} sessions at a time commit concurrently through \`LmdbSessionRepository.commit()\`, each one turn at a time (a turn = one commit of`,
      '`turn_started` + `assistant_message` + `turn_completed` with the snapshot they produce, pre-built by `SessionLog` through the real reducer).',
      'Baseline, in the same run: the same serialized events written to a fresh environment opened by the same `openLmdbEnv`, grouped the same',
      'way — one `childTransaction` of `events.put([sid, seq], event)` per commit, awaited, then at `fsync` the flush of that transaction',
      `(as the store does). Fresh temp directory per run (\`${tmpdir()}\`, ext4 here); store and raw alternate, ${REPS} runs each, figures are over all runs.`,
    ].join(' '),
    config: {
      'concurrent sessions': SESSIONS,
      'turn commits per session': TURNS,
      'sessions per writer (fsync / relaxed)': `${FSYNC_PER_LANE} / ${RELAXED_PER_LANE}`,
      'events per commit': eventsPerCommit,
      'runs per side and durability': REPS,
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
