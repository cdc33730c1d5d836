/**
 * store-scale: how the LMDB session store behaves as data grows.
 *
 *  (a) one session with 100,000 events (built by direct, batched repository commits through
 *      the real reducer): `events.readAfter(id, 0)` and `sessions.get(id)`, in-process, on a
 *      freshly opened repository;
 *  (b) replaying those 100,000 events over SSE (`GET /v1/sessions/{id}/events?after=0`) from a
 *      server (child process) started on that data directory, until the last seq arrives —
 *      with the service defaults, and again with a queue limit above the replay size;
 *  (c) start-up on a data directory holding 10,000 sessions versus one holding 10: time from
 *      fork to the server's 'ready' (the start-up log line) and to the first successful
 *      `/healthz`, the child's own milestones, and `LmdbSessionRepository.open()` in-process.
 *      Both directories are built through the repository (batched concurrent commits, relaxed
 *      durability) and left as a cleanly stopped service leaves them (every session projected).
 *
 *   npx tsx bench/store-scale.bench.ts      (or: npx tsx bench/run.ts store-scale)
 *   BENCH_BIG_EVENTS=100000 BENCH_MANY_SESSIONS=10000 BENCH_FEW_SESSIONS=10 BENCH_STARTS=5 to change the sizes.
 */
import http from 'node:http'
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { EventEnvelope, EventType } from '../src/core/events.js'
import type { SessionRecord } from '../src/core/session-record.js'
import { config, SessionLog, sessionId } from '../test/contract/fixtures.js'
import { appImport } from './lib/app.js'
import { BURROW_ENV } from './lib/env.js'
import { startServer } from './lib/child.js'
import { isMain, median, metric, target, type BenchResult } from './lib/types.js'

const { DEFAULT_TENANT } = await appImport<typeof import('../src/core/ids.js')>('core/ids.js')
const { idempotencyKey } = await appImport<typeof import('../src/session/idempotency.js')>('session/idempotency.js')
const { applyEvent } = await appImport<typeof import('../src/session/session-reducer.js')>('session/session-reducer.js')
const { LmdbSessionRepository } =
  await appImport<typeof import('../src/store/lmdb-session-repository.js')>('store/lmdb-session-repository.js')
type LmdbSessionRepository = Awaited<ReturnType<typeof LmdbSessionRepository.open>>

const BIG_EVENTS = Number(process.env.BENCH_BIG_EVENTS ?? 100_000)
const MANY = Number(process.env.BENCH_MANY_SESSIONS ?? 10_000)
const FEW = Number(process.env.BENCH_FEW_SESSIONS ?? 10)
/** Server starts per directory (alternating), and in-process opens per directory. */
const STARTS = Number(process.env.BENCH_STARTS ?? 5)
const OPENS = Number(process.env.BENCH_OPENS ?? 5)
/** Turns per big-session commit while building it (3 events each). */
const BUILD_BATCH_TURNS = 1_000
const BUILD_CONCURRENCY = 256
const REPLAY_TIMEOUT_MS = 30_000
const IDEMPOTENCY_TTL_MS = 24 * 3_600_000

const TARGET_STARTUP_RATIO = 1.5

/** Not `burrow-bench-`: bench/lib/child.ts deletes those when a server stops, and these outlive several servers. */
const scaleDir = (what: string) => mkdtempSync(join(tmpdir(), `burrow-scale-${what}-`))

const min = (xs: number[]) => Math.min(...xs)
const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`

function dirBytes(dir: string): number {
  let n = 0
  for (const e of readdirSync(dir, { withFileTypes: true }))
    n += e.isDirectory() ? dirBytes(join(dir, e.name)) : statSync(join(dir, e.name)).size
  return n
}

// ---- (a) one session with BIG_EVENTS events ------------------------------------------------

/**
 * Builds the session: session_created, then complete turns (turn_started, assistant_message,
 * turn_completed — the shapes of SessionLog.turn) through the real reducer, committed
 * BUILD_BATCH_TURNS turns per commit. (SessionLog itself deep-copies the record per commit,
 * which is quadratic at this length.) Each commit is awaited before the record moves on.
 */
async function buildBigSession(
  repo: LmdbSessionRepository,
  id: string,
): Promise<{ lastSeq: number; messages: number; turns: number; record: SessionRecord }> {
  const log = new SessionLog(id, config(DEFAULT_TENANT))
  const created = log.create()
  await repo.commit(created.events, created.record)
  let record: SessionRecord = created.record
  let seq = record.last_seq
  const t0 = Date.parse('2026-01-02T00:00:00.000Z')
  const ev = (turn: number, type: EventType, data: unknown) =>
    ({ seq: ++seq, session_id: id, turn, type, at: new Date(t0 + seq).toISOString(), data }) as EventEnvelope
  while (seq < BIG_EVENTS) {
    const batch: EventEnvelope[] = []
    for (let i = 0; i < BUILD_BATCH_TURNS && seq + 3 <= BIG_EVENTS; i++) {
      const turn = record.turn_count + 1
      const text = `question ${turn}: what is ${turn} squared?`
      for (const e of [
        ev(turn, 'turn_started', { input: [{ type: 'text', text }], continuation: false }),
        ev(turn, 'assistant_message', {
          message: { role: 'assistant', content: [{ type: 'text', text: `echo: ${text}` }] },
          usage: { input_tokens: 10, output_tokens: 3 },
          stop_reason: 'end_turn',
          model: 'offline:echo',
          step: 1,
          client_tool_call_ids: [],
        }),
        ev(turn, 'turn_completed', {
          output_text: `echo: ${text}`,
          usage: { input_tokens: 10, output_tokens: 3 },
          stop_reason: 'end_turn',
        }),
      ]) {
        record = applyEvent(record, e)
        batch.push(e)
      }
    }
    if (batch.length === 0) break // fewer than 3 events left: stop at a turn boundary
    await repo.commit(batch, record)
  }
  await repo.projection.projected(id, record.last_seq) // as a service that ran and stopped cleanly leaves it
  return { lastSeq: record.last_seq, messages: record.messages.length, turns: record.turn_count, record }
}

/** Commits `n` more complete turns (one commit of 3 events each, through the real reducer) to a session; ms per commit. */
async function appendTurns(repo: LmdbSessionRepository, record: SessionRecord, n: number): Promise<number[]> {
  const ms: number[] = []
  const id = record.session_id
  const t0 = Date.parse('2026-01-03T00:00:00.000Z')
  for (let i = 0; i < n; i++) {
    const turn = record.turn_count + 1
    const text = `one more question ${turn}`
    let seq = record.last_seq
    const ev = (type: EventType, data: unknown) =>
      ({ seq: ++seq, session_id: id, turn, type, at: new Date(t0 + seq).toISOString(), data }) as EventEnvelope
    const events = [
      ev('turn_started', { input: [{ type: 'text', text }], continuation: false }),
      ev('assistant_message', {
        message: { role: 'assistant', content: [{ type: 'text', text: `echo: ${text}` }] },
        usage: { input_tokens: 10, output_tokens: 3 },
        stop_reason: 'end_turn',
        model: 'offline:echo',
        step: 1,
        client_tool_call_ids: [],
      }),
      ev('turn_completed', { output_text: `echo: ${text}`, usage: { input_tokens: 10, output_tokens: 3 }, stop_reason: 'end_turn' }),
    ]
    for (const e of events) record = applyEvent(record, e)
    const s = performance.now()
    await repo.commit(events, record)
    ms.push(performance.now() - s)
  }
  return ms
}

interface Replay {
  seconds: number
  firstEventSeconds: number
  received: number
  lastSeq: number
  closedReason: string | null
  bytes: number
}

/** Reads an SSE replay until `lastSeq` arrives, the stream ends or the timeout; frames are split, not JSON-parsed. */
function replay(url: string, lastSeq: number): Promise<Replay> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now()
    let firstEvent = NaN
    let buf = ''
    let received = 0
    let last = 0
    let bytes = 0
    let closedReason: string | null = null
    let done = false
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(timer)
      req.destroy()
      resolve({
        seconds: (performance.now() - t0) / 1000,
        firstEventSeconds: (firstEvent - t0) / 1000,
        received,
        lastSeq: last,
        closedReason,
        bytes,
      })
    }
    const timer = setTimeout(finish, REPLAY_TIMEOUT_MS)
    const req = http.get(url, { agent: false, headers: { accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) {
        clearTimeout(timer)
        res.resume()
        reject(new Error(`GET ${url} → ${res.statusCode}`))
        return
      }
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        bytes += chunk.length
        buf += chunk
        let start = 0
        for (let end = buf.indexOf('\n\n'); end !== -1; end = buf.indexOf('\n\n', start)) {
          if (buf.startsWith('id: ', start)) {
            const seq = Number(buf.slice(start + 4, buf.indexOf('\n', start)))
            if (received === 0) firstEvent = performance.now()
            received++
            last = seq
          } else if (buf.startsWith('event: stream_closed', start)) {
            const m = /"reason":"([^"]+)"/.exec(buf.slice(start, end))
            closedReason = m?.[1] ?? 'unknown'
          }
          start = end + 2
        }
        buf = buf.slice(start)
        if (last >= lastSeq) finish()
      })
      res.on('end', finish)
      res.on('error', finish)
    })
    req.on('error', (err) => {
      if (!done) {
        done = true
        clearTimeout(timer)
        reject(err)
      }
    })
  })
}

// ---- (c) many sessions ------------------------------------------------------------------------

/** `n` sessions of 2 turns each (3 commits: create, turn, turn), with one idempotency record each unless `bare`, committed BUILD_CONCURRENCY at a time. */
async function buildSessions(dir: string, n: number, offset: number, bare = false): Promise<number> {
  const t0 = performance.now()
  const repo = await LmdbSessionRepository.open(dir, { durability: 'relaxed', idempotencyTtlMs: IDEMPOTENCY_TTL_MS })
  try {
    let next = 0
    await Promise.all(
      Array.from({ length: Math.min(BUILD_CONCURRENCY, n) }, async () => {
        for (let i = next++; i < n; i = next++) {
          const id = sessionId(offset + i)
          const log = new SessionLog(id, config(DEFAULT_TENANT))
          for (const c of [log.create(), log.turn(`hello ${i}`), log.turn(`again ${i}`)]) await repo.commit(c.events, c.record)
          // as if the first turn was sent with an Idempotency-Key (records live 24 h; start-up sweeps them)
          if (!bare)
            await repo.idempotency.put(idempotencyKey(DEFAULT_TENANT, id, `turn-${i}`), {
              fingerprint: `fp-${i}`,
              created_at: Date.now(),
              outcome: { ok: true, value: { session_id: id, status: 'completed', output_text: `echo: hello ${i}` } },
            })
          await repo.projection.projected(id, log.record!.last_seq) // a clean stop leaves every session projected
        }
      }),
    )
  } finally {
    await repo.close()
  }
  return (performance.now() - t0) / 1000
}

interface Start {
  forkToReadyMs: number
  forkToHealthzMs: number
  createMs: number
  importedMs: number
}

async function startOnce(dir: string): Promise<Start> {
  const env: Record<string, string> = { ...BURROW_ENV, BURROW_SESSION_STORE: 'lmdb', BURROW_DURABILITY: 'fsync', BURROW_DATA_DIR: dir }
  const t0 = performance.now()
  const server = await startServer('burrow', env)
  try {
    const res = await fetch(`${server.url}/healthz`)
    await res.arrayBuffer()
    if (res.status !== 200) throw new Error(`/healthz → ${res.status}`)
    const healthz = performance.now() - t0
    const s = server.startup
    return {
      forkToReadyMs: s.forkToReadyMs,
      forkToHealthzMs: healthz,
      createMs: (s.createdMs ?? NaN) - (s.importedMs ?? NaN),
      importedMs: s.importedMs ?? NaN,
    }
  } finally {
    await server.stop()
  }
}

interface Open {
  openMs: number
  recoverQueriesMs: number
  sweepMs: number
}

/** LmdbSessionRepository.open(), then what start-up asks of it (running turns, pending projections, the idempotency sweep). */
async function openOnce(dir: string): Promise<Open> {
  const t0 = performance.now()
  const repo = await LmdbSessionRepository.open(dir, { durability: 'fsync', idempotencyTtlMs: IDEMPOTENCY_TTL_MS })
  const t1 = performance.now()
  try {
    const running = await repo.sessions.runningTurns()
    const pending = await repo.projection.pending()
    const t2 = performance.now()
    await repo.sweepIdempotency()
    const t3 = performance.now()
    if (running.length || pending.length) throw new Error(`unexpected start-up work: ${running.length} running, ${pending.length} pending`)
    return { openMs: t1 - t0, recoverQueriesMs: t2 - t1, sweepMs: t3 - t2 }
  } finally {
    await repo.close()
  }
}

export async function run(): Promise<BenchResult> {
  const t0 = performance.now()
  const log = (s: string) => console.log(`[store-scale] ${s}`)
  const dirs: string[] = []
  try {
    // ---- (a) -------------------------------------------------------------------------------
    const bigDir = scaleDir('big')
    dirs.push(bigDir)
    const bigId = sessionId(900_000_000)
    let b0 = performance.now()
    let built: Awaited<ReturnType<typeof buildBigSession>>
    {
      const repo = await LmdbSessionRepository.open(bigDir, { durability: 'relaxed', idempotencyTtlMs: IDEMPOTENCY_TTL_MS })
      try {
        built = await buildBigSession(repo, bigId)
      } finally {
        await repo.close()
      }
    }
    const bigBuildSeconds = (performance.now() - b0) / 1000
    const bigBytes = dirBytes(bigDir)
    log(`built a session of ${built.lastSeq} events (${built.messages} messages) in ${bigBuildSeconds.toFixed(1)} s, ${mib(bigBytes)}`)

    const readMs: number[] = []
    const getMs: number[] = []
    let openBigMs = NaN
    {
      const o0 = performance.now()
      const repo = await LmdbSessionRepository.open(bigDir, { durability: 'fsync', idempotencyTtlMs: IDEMPOTENCY_TTL_MS })
      openBigMs = performance.now() - o0
      try {
        for (let i = 0; i < 3; i++) {
          let s = performance.now()
          const events = await repo.events.readAfter(bigId, 0)
          readMs.push(performance.now() - s)
          if (events.length !== built.lastSeq || events.at(-1)?.seq !== built.lastSeq)
            throw new Error(`readAfter returned ${events.length} events`)
          s = performance.now()
          const rec = await repo.sessions.get(bigId)
          getMs.push(performance.now() - s)
          if (rec?.last_seq !== built.lastSeq || rec.messages.length !== built.messages)
            throw new Error(`get returned last_seq ${rec?.last_seq}, ${rec?.messages.length} messages`)
        }
      } finally {
        await repo.close()
      }
    }
    log(`readAfter(0): ${readMs.map((x) => x.toFixed(0)).join(', ')} ms; get: ${getMs.map((x) => x.toFixed(0)).join(', ')} ms`)

    // ---- (b) -------------------------------------------------------------------------------
    const replays: Array<{ label: string; queueLimit: string; r: Replay; serverCpuMs: number }> = []
    for (const [label, queueLimit] of [
      ['service defaults', undefined],
      ['queue limit above the replay', String(built.lastSeq * 2)],
    ] as const) {
      const env: Record<string, string> = {
        ...BURROW_ENV,
        BURROW_SESSION_STORE: 'lmdb',
        BURROW_DURABILITY: 'fsync',
        BURROW_DATA_DIR: bigDir,
        ...(queueLimit ? { BURROW_SSE_QUEUE_LIMIT: queueLimit } : {}),
      }
      const server = await startServer('burrow', env)
      try {
        const c0 = await server.stats(false)
        const r = await replay(`${server.url}/v1/sessions/${bigId}/events?after=0`, built.lastSeq)
        const c1 = await server.stats(false)
        replays.push({
          label,
          queueLimit: queueLimit ?? 'default (1024)',
          r,
          serverCpuMs: (c1.cpuUserUs + c1.cpuSystemUs - c0.cpuUserUs - c0.cpuSystemUs) / 1000,
        })
        log(
          `SSE replay (${label}): ${r.received} events, last seq ${r.lastSeq}, ${r.seconds.toFixed(2)} s (first event after ${r.firstEventSeconds.toFixed(2)} s)` +
            (r.closedReason ? `; stream_closed: ${r.closedReason}` : ''),
        )
      } finally {
        await server.stop()
      }
    }

    // ---- (a') appending to the long session vs a short one (in-process, relaxed: CPU only, no flush wait) ----
    let appendBig: number[]
    let appendSmall: number[]
    {
      const repo = await LmdbSessionRepository.open(bigDir, { durability: 'relaxed', idempotencyTtlMs: IDEMPOTENCY_TTL_MS })
      try {
        const small = new SessionLog(sessionId(900_000_001), config(DEFAULT_TENANT))
        const c = small.create()
        await repo.commit(c.events, c.record)
        const smallRecord = c.record
        await appendTurns(repo, smallRecord, 20) // warm-up
        await appendTurns(repo, built.record, 20)
        appendSmall = []
        appendBig = []
        for (let i = 0; i < 5; i++) {
          // interleaved rounds
          appendSmall.push(...(await appendTurns(repo, smallRecord, 40)))
          appendBig.push(...(await appendTurns(repo, built.record, 40)))
        }
      } finally {
        await repo.close()
      }
    }
    log(
      `commit of one turn: ${median(appendBig).toFixed(2)} ms on the ${built.turns}-turn session, ${median(appendSmall).toFixed(2)} ms on a short one (medians)`,
    )

    // ---- (c) -------------------------------------------------------------------------------
    // many: MANY sessions + one idempotency record each; few: FEW sessions, likewise; bare: MANY sessions, no idempotency record
    type Dir = 'many' | 'few' | 'bare'
    const dirOf: Record<Dir, string> = { many: scaleDir('many'), few: scaleDir('few'), bare: scaleDir('bare') }
    dirs.push(...Object.values(dirOf))
    const manyBuildSeconds = await buildSessions(dirOf.many, MANY, 0)
    await buildSessions(dirOf.few, FEW, MANY)
    await buildSessions(dirOf.bare, MANY, MANY + FEW, true)
    log(
      `built ${MANY} sessions in ${manyBuildSeconds.toFixed(1)} s (${mib(dirBytes(dirOf.many))}), ${FEW} sessions (${mib(dirBytes(dirOf.few))}), ` +
        `${MANY} without idempotency records (${mib(dirBytes(dirOf.bare))})`,
    )
    const sessionsIn = (k: Dir) =>
      k === 'few' ? `${FEW} sessions` : k === 'many' ? `${MANY} sessions` : `${MANY} sessions, no idempotency records`

    const opens: Record<Dir, Open[]> = { many: [], few: [], bare: [] }
    await openOnce(dirOf.few) // warm the code paths
    for (let i = 0; i < OPENS; i++) for (const k of ['few', 'many', 'bare'] as const) opens[k].push(await openOnce(dirOf[k]))
    const starts: Record<Dir, Start[]> = { many: [], few: [], bare: [] }
    for (let i = 0; i < STARTS; i++) {
      for (const k of (i % 2 === 0 ? ['few', 'many', 'bare'] : ['bare', 'many', 'few']) as Dir[]) {
        const s = await startOnce(dirOf[k])
        starts[k].push(s)
        log(
          `start-up, ${sessionsIn(k)}: ready ${s.forkToReadyMs.toFixed(0)} ms, /healthz ${s.forkToHealthzMs.toFixed(0)} ms after fork; createBurrow ${s.createMs.toFixed(0)} ms`,
        )
      }
    }

    const med = (k: Dir, f: (s: Start) => number) => median(starts[k].map(f))
    const omed = (k: Dir, f: (o: Open) => number) => median(opens[k].map(f))
    const healthRatio = med('many', (s) => s.forkToHealthzMs) / med('few', (s) => s.forkToHealthzMs)
    const createRatio = med('many', (s) => s.createMs) / med('few', (s) => s.createMs)
    const [dflt, big] = [replays[0]!, replays[1]!]
    const targets = [
      target(`start-up to first /healthz, ${MANY} vs ${FEW} sessions (median)`, healthRatio, '<=', TARGET_STARTUP_RATIO, '×'),
      target(
        `createBurrow() (store open, recovery, projector), ${MANY} vs ${FEW} sessions (median)`,
        createRatio,
        '<=',
        TARGET_STARTUP_RATIO,
        '×',
      ),
      target(`SSE replay of ${built.lastSeq} events with service defaults: events missing`, built.lastSeq - dflt.r.received, '<=', 0, ''),
    ]
    const metrics = [
      metric(`(a) events.readAfter(id, 0), ${built.lastSeq} events — first`, readMs[0]!, 'ms'),
      metric(`(a) events.readAfter(id, 0) — best of ${readMs.length}`, min(readMs), 'ms'),
      metric(`(a) sessions.get(id), ${built.messages} messages — first`, getMs[0]!, 'ms'),
      metric(`(a) sessions.get(id) — best of ${getMs.length}`, min(getMs), 'ms'),
      metric('(a) LmdbSessionRepository.open() of that directory', openBigMs, 'ms'),
      metric(
        `(a) commit() of one more turn (3 events), median — long session vs a new one (≤ 220 turns; relaxed)`,
        median(appendBig),
        'ms',
        median(appendSmall),
      ),
      ...replays.flatMap(({ label, r, serverCpuMs }) =>
        r.received < built.lastSeq
          ? [
              metric(`(b) SSE replay, ${label}: events received`, r.received, ''),
              metric(`(b) SSE replay, ${label}: time until the stream ended`, r.seconds * 1000, 'ms'),
            ]
          : [
              metric(`(b) SSE replay, ${label}: time to the last event`, r.seconds * 1000, 'ms'),
              metric(`(b) SSE replay, ${label}: time to the first event`, r.firstEventSeconds * 1000, 'ms'),
              metric(`(b) SSE replay, ${label}: events/s`, r.received / r.seconds, 'events/s'),
              metric(`(b) SSE replay, ${label}: server CPU`, serverCpuMs, 'ms'),
            ],
      ),
      metric(
        `(c) fork → first /healthz (median of ${STARTS})`,
        med('many', (s) => s.forkToHealthzMs),
        'ms',
        med('few', (s) => s.forkToHealthzMs),
      ),
      metric(
        `(c) fork → ready / start-up log line (median of ${STARTS})`,
        med('many', (s) => s.forkToReadyMs),
        'ms',
        med('few', (s) => s.forkToReadyMs),
      ),
      metric(
        '(c) child: process start → modules loaded (median)',
        med('many', (s) => s.importedMs),
        'ms',
        med('few', (s) => s.importedMs),
      ),
      metric(
        '(c) child: createBurrow() (median)',
        med('many', (s) => s.createMs),
        'ms',
        med('few', (s) => s.createMs),
      ),
      metric(
        `(c) child: createBurrow(), ${MANY} sessions without idempotency records (median)`,
        med('bare', (s) => s.createMs),
        'ms',
        med('few', (s) => s.createMs),
      ),
      metric(
        `(c) fork → first /healthz, ${MANY} sessions without idempotency records (median)`,
        med('bare', (s) => s.forkToHealthzMs),
        'ms',
        med('few', (s) => s.forkToHealthzMs),
      ),
      metric(
        `(c) in-process LmdbSessionRepository.open() (median of ${OPENS})`,
        omed('many', (o) => o.openMs),
        'ms',
        omed('few', (o) => o.openMs),
      ),
      metric(
        '(c) in-process runningTurns() + projection.pending() (median)',
        omed('many', (o) => o.recoverQueriesMs),
        'ms',
        omed('few', (o) => o.recoverQueriesMs),
      ),
      metric(
        '(c) in-process sweepIdempotency() (median)',
        omed('many', (o) => o.sweepMs),
        'ms',
        omed('few', (o) => o.sweepMs),
      ),
      metric(
        `(c) in-process sweepIdempotency(), ${MANY} sessions without idempotency records (median)`,
        omed('bare', (o) => o.sweepMs),
        'ms',
        omed('few', (o) => o.sweepMs),
      ),
    ]
    const list = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(', ')
    const notes = [
      `(a) The session: 1 \`session_created\` + ${built.turns} complete turns (\`turn_started\`, \`assistant_message\`, \`turn_completed\`) = ${built.lastSeq} events, ` +
        `${built.messages} messages in its snapshot; built through the real reducer and committed ${BUILD_BATCH_TURNS} turns per commit in ${bigBuildSeconds.toFixed(1)} s; ` +
        `data directory ${mib(bigBytes)}. readAfter runs: ${list(readMs)} ms; get runs: ${list(getMs)} ms (in-process, repository freshly opened).`,
      `(a) commit() of one turn (3 events, relaxed durability so no flush wait: CPU and the write transaction only), ${appendBig.length} commits each, ` +
        `interleaved: median ${median(appendBig).toFixed(2)} ms on the ${built.turns}-turn session vs ${median(appendSmall).toFixed(2)} ms on a short session` +
        (median(appendBig) > 1.3 * median(appendSmall)
          ? " — commit cost grows with the session's length: `LmdbSessionRepository.commit()` scans the whole `snapshot.usage_by_turn` " +
            "(one entry per turn) on every commit to find the entries of this commit's turns."
          : '.'),
      `(b) Each replay is a fresh server (child process) on that directory; the client splits frames on blank lines and reads \`id:\` lines only. ` +
        replays
          .map(
            ({ label, queueLimit, r }) =>
              `${label} (BURROW_SSE_QUEUE_LIMIT ${queueLimit}): ${r.received} of ${built.lastSeq} events, ` +
              `${(r.bytes / 2 ** 20).toFixed(1)} MiB of SSE, ${r.closedReason ? `ended by \`stream_closed\` (${r.closedReason})` : 'complete'}`,
          )
          .join('; ') +
        '.',
      ...(dflt.r.received < built.lastSeq
        ? [
            `(b) **Finding (not the store):** with the service defaults the replay delivered ${dflt.r.received} of ${built.lastSeq} events` +
              `${dflt.r.closedReason ? ` and ended with \`stream_closed\` (\`${dflt.r.closedReason}\`)` : ''}. \`LocalSessionService.subscribe\` reads the whole ` +
              "range with `storedEvents()` and `Subscription.release()` pushes it into the subscriber's bounded live queue " +
              '(`BURROW_SSE_QUEUE_LIMIT`, 1,024) before the SSE writer is attached; the 1,025th push closes the subscriber as a slow consumer and ' +
              '`closeWith()` empties the queue, so no event at all is delivered. Reconnecting with the same Last-Event-ID repeats it: a client ' +
              'more than 1,024 stored events behind can never catch up. Replayed events should not count against the live-queue limit ' +
              '(e.g. write the replay in pages with back-pressure — `readAfter(id, after, upTo, limit)` — then attach the live queue).',
          ]
        : []),
      `(c) ${MANY} sessions (${mib(dirBytes(dirOf.many))}) vs ${FEW} (${mib(dirBytes(dirOf.few))}); each session: create + 2 turns (3 commits) and one ` +
        'idempotency record (as if its first turn carried an Idempotency-Key), every session projected (checkpoint = last seq, nothing pending), ' +
        `as a cleanly stopped service leaves them; a third directory holds ${MANY} sessions without idempotency records, to tell the two apart. ` +
        `${MANY} sessions built in ${manyBuildSeconds.toFixed(1)} s (relaxed, ${BUILD_CONCURRENCY} concurrent). Server starts rotate over the three ` +
        `directories. fork → /healthz runs: ${(['many', 'bare', 'few'] as const).map((k) => `${sessionsIn(k)}: ${list(starts[k].map((s) => s.forkToHealthzMs))} ms`).join('; ')}. ` +
        `createBurrow runs: ${(['many', 'bare', 'few'] as const).map((k) => `${sessionsIn(k)}: ${list(starts[k].map((s) => s.createMs))} ms`).join('; ')}.`,
      'Start-up time is dominated by node + tsx loading the modules (`child: process start → modules loaded`); the data-dependent part is ' +
        '`createBurrow()`: it opens the store (constant), closes turns left running and lists pending projections (indexes: nothing to do here), ' +
        'and awaits `sweepIdempotency()`, which scans and decodes every idempotency record in one write transaction — ' +
        `${omed('many', (o) => o.sweepMs).toFixed(0)} ms for ${MANY} records in-process (warm), more in a fresh process — so start-up grows with ` +
        'the idempotency records younger than their 24 h TTL, i.e. with recent traffic, not with sessions as such.',
    ]
    return {
      name: 'store-scale',
      title: 'Store at scale: a 100,000-event session, SSE replay, start-up with 10,000 sessions',
      description: [
        `(a) One session with ${built.lastSeq} events, built by direct batched repository commits: \`events.readAfter(id, 0)\` and \`sessions.get(id)\``,
        `in-process on a freshly opened repository. (b) The same ${built.lastSeq} events replayed over SSE (\`GET /v1/sessions/{id}/events?after=0\`)`,
        'from a server in a child process started on that data directory, timed until the last seq arrives. (c) A server started on a data',
        `directory of ${MANY} sessions vs one of ${FEW} (built through the repository, relaxed durability): fork → 'ready' (the start-up log`,
        "line) and → first successful `/healthz`, the child's own milestones, and `LmdbSessionRepository.open()` in-process. Every directory",
        `is a fresh temp directory (\`${tmpdir()}\`, removed afterwards); servers run with \`BURROW_SESSION_STORE=lmdb\`, \`BURROW_DURABILITY=fsync\`.`,
      ].join(' '),
      config: {
        'events in the big session': built.lastSeq,
        'sessions (many / few)': `${MANY} / ${FEW}`,
        'server starts per directory': STARTS,
        'in-process opens per directory': OPENS,
        'SSE queue limit (second replay)': big.queueLimit,
        capabilities: 'BURROW_SESSION_STORE=lmdb, BURROW_MEMORY_STORE=off, BURROW_COMPACTION=off',
      },
      metrics,
      targets,
      pass: targets.every((t) => t.pass),
      notes,
      date: new Date().toISOString(),
      durationSeconds: (performance.now() - t0) / 1000,
    }
  } finally {
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  }
}

if (isMain(import.meta.url)) {
  const r = await run()
  console.log(JSON.stringify(r, null, 2))
  process.exitCode = r.pass ? 0 : 1
}
