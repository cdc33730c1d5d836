/**
 * pg-driver: the two PostgreSQL drivers for Node — node-postgres (`pg`, the baseline) and
 * `postgres` (porsager's postgres.js) — on the operations a turn makes, against the same
 * database in the same run, so the session store's driver is chosen from numbers.
 *
 *   1. A turn's commit: append a batch of EVENTS_PER_COMMIT event rows (jsonb) and upsert the
 *      session's snapshot with a fencing-token check, all or nothing — measured two ways:
 *      (a) an explicit transaction (BEGIN; INSERT events; INSERT … ON CONFLICT DO UPDATE … WHERE
 *      fence; COMMIT), (b) one statement (a data-modifying CTE: the events are inserted only when
 *      the fenced upsert matched), which needs no BEGIN/COMMIT round trips.
 *   2. A replay: read one session's events by seq range (`after < seq <= upTo`).
 *   3. LISTEN/NOTIFY: the time from a NOTIFY on one connection to its delivery on a listening one.
 *
 * Both drivers run prepared statements with the same SQL text and the same parameters (JSON is
 * passed as text and cast, so neither driver's serializer is in the way); `synchronous_commit`
 * stays on (the server's default), so every commit waits for its WAL flush. SESSIONS writers
 * commit concurrently through a pool of POOL connections. The two drivers alternate, REPS runs
 * each; figures are over all runs. The value column is postgres.js, the baseline column `pg`.
 *
 *   npx tsx bench/run.ts pg-driver      (PostgreSQL at BURROW_TEST_PG_URL, default postgres://postgres@127.0.0.1:5432/postgres)
 */
import pg from 'pg'
import postgres from 'postgres'
import { config, SessionLog, sessionId } from '../test/contract/fixtures.js'
import { tempDatabase } from '../test/helpers/pg.js'
import { appImport } from './lib/app.js'
import { isMain, metric, percentile, target, type BenchResult } from './lib/types.js'

const { PgSessionRepository } = await appImport<typeof import('../src/store/pg-session-repository.js')>('store/pg-session-repository.js')

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 16)
const POOL = Number(process.env.BENCH_POOL ?? 8)
const COMMITS = Number(process.env.BENCH_COMMITS ?? 120)
const EVENTS_PER_COMMIT = 5
const READS = Number(process.env.BENCH_READS ?? 1600)
const NOTIFIES = Number(process.env.BENCH_NOTIFIES ?? 400)
const REPS = Number(process.env.BENCH_REPS ?? 3)

const SCHEMA = `
CREATE TABLE sessions (tenant text NOT NULL, session_id text NOT NULL, last_seq bigint NOT NULL, fence bigint NOT NULL,
  snapshot jsonb NOT NULL, PRIMARY KEY (tenant, session_id));
CREATE TABLE events (tenant text NOT NULL, session_id text NOT NULL, seq bigint NOT NULL, turn int NOT NULL, type text NOT NULL,
  at timestamptz NOT NULL, data jsonb NOT NULL, PRIMARY KEY (tenant, session_id, seq));`

const INSERT_EVENTS = `INSERT INTO events (tenant, session_id, seq, turn, type, at, data)
  SELECT $1, $2, e.seq, e.turn, e.type, e.at, e.data FROM jsonb_to_recordset($3::text::jsonb)
  AS e(seq bigint, turn int, type text, at timestamptz, data jsonb)`
/** A session's first commit inserts its row (a conflict means it exists: no row, the commit fails). */
const INSERT_SNAPSHOT = `INSERT INTO sessions (tenant, session_id, last_seq, fence, snapshot)
  SELECT $1, $2, $3, $4, $5::text::jsonb WHERE $6::bigint = 0 ON CONFLICT DO NOTHING`
/** Later ones update it only where the log ends where the batch starts and no newer fencing token has written. */
const UPDATE_SNAPSHOT = `UPDATE sessions SET last_seq = $3, fence = $4, snapshot = $5::text::jsonb
  WHERE tenant = $1 AND session_id = $2 AND last_seq = $6 AND fence <= $4`
const snapshotSql = (lastSeq: number) => (lastSeq === 0 ? INSERT_SNAPSHOT : UPDATE_SNAPSHOT)
const oneStatement = (lastSeq: number) => `WITH s AS (${snapshotSql(lastSeq)} RETURNING 1)
  INSERT INTO events (tenant, session_id, seq, turn, type, at, data)
  SELECT $1, $2, e.seq, e.turn, e.type, e.at, e.data FROM jsonb_to_recordset($7::text::jsonb)
  AS e(seq bigint, turn int, type text, at timestamptz, data jsonb) WHERE EXISTS (SELECT 1 FROM s)`
const READ_RANGE = `SELECT seq, turn, type, at, data FROM events WHERE tenant = $1 AND session_id = $2 AND seq > $3 AND seq <= $4 ORDER BY seq`

/** The operations under test, one implementation per driver. */
interface Driver {
  name: string
  txCommit(tenant: string, sid: string, lastSeq: number, fence: number, snapshot: string, events: string): Promise<void>
  oneStatement(tenant: string, sid: string, lastSeq: number, fence: number, snapshot: string, events: string): Promise<void>
  read(tenant: string, sid: string, after: number, upTo: number): Promise<unknown[]>
  /** Starts listening on `channel`; `onNote` gets each payload. */
  listen(channel: string, onNote: (payload: string) => void): Promise<void>
  notify(channel: string, payload: string): Promise<void>
  end(): Promise<void>
}

function pgDriver(url: string): Driver {
  const pool = new pg.Pool({ connectionString: url, max: POOL })
  pool.on('error', () => undefined)
  let listener: pg.Client | undefined
  const q = (name: string, text: string, values: unknown[]) => pool.query({ name, text, values })
  return {
    name: 'pg',
    async txCommit(tenant, sid, lastSeq, fence, snapshot, events) {
      const c = await pool.connect()
      try {
        await c.query('BEGIN')
        await c.query({ name: 'ins', text: INSERT_EVENTS, values: [tenant, sid, events] })
        const r = await c.query({
          name: lastSeq === 0 ? 'ins-s' : 'upd-s',
          text: snapshotSql(lastSeq),
          values: [tenant, sid, lastSeq + EVENTS_PER_COMMIT, fence, snapshot, lastSeq],
        })
        if (r.rowCount !== 1) throw new Error('fenced out')
        await c.query('COMMIT')
      } catch (err) {
        await c.query('ROLLBACK').catch(() => undefined)
        throw err
      } finally {
        c.release()
      }
    },
    async oneStatement(tenant, sid, lastSeq, fence, snapshot, events) {
      const r = await q(lastSeq === 0 ? 'one-ins' : 'one-upd', oneStatement(lastSeq), [
        tenant,
        sid,
        lastSeq + EVENTS_PER_COMMIT,
        fence,
        snapshot,
        lastSeq,
        events,
      ])
      if (r.rowCount !== EVENTS_PER_COMMIT) throw new Error('fenced out')
    },
    async read(tenant, sid, after, upTo) {
      return (await q('read', READ_RANGE, [tenant, sid, after, upTo])).rows
    },
    async listen(channel, onNote) {
      listener = new pg.Client({ connectionString: url })
      listener.on('error', () => undefined)
      await listener.connect()
      listener.on('notification', (n) => onNote(n.payload ?? ''))
      await listener.query(`LISTEN ${channel}`)
    },
    async notify(channel, payload) {
      await pool.query('SELECT pg_notify($1, $2)', [channel, payload])
    },
    async end() {
      await listener?.end()
      await pool.end()
    },
  }
}

function postgresJsDriver(url: string): Driver {
  const sql = postgres(url, { max: POOL, onnotice: () => undefined })
  return {
    name: 'postgres',
    async txCommit(tenant, sid, lastSeq, fence, snapshot, events) {
      await sql.begin(async (tx) => {
        await tx.unsafe(INSERT_EVENTS, [tenant, sid, events], { prepare: true })
        const r = await tx.unsafe(snapshotSql(lastSeq), [tenant, sid, lastSeq + EVENTS_PER_COMMIT, fence, snapshot, lastSeq], {
          prepare: true,
        })
        if (r.count !== 1) throw new Error('fenced out')
      })
    },
    async oneStatement(tenant, sid, lastSeq, fence, snapshot, events) {
      const r = await sql.unsafe(oneStatement(lastSeq), [tenant, sid, lastSeq + EVENTS_PER_COMMIT, fence, snapshot, lastSeq, events], {
        prepare: true,
      })
      if (r.count !== EVENTS_PER_COMMIT) throw new Error('fenced out')
    },
    async read(tenant, sid, after, upTo) {
      return await sql.unsafe(READ_RANGE, [tenant, sid, after, upTo], { prepare: true })
    },
    async listen(channel, onNote) {
      await sql.listen(channel, onNote)
    },
    async notify(channel, payload) {
      await sql.unsafe('SELECT pg_notify($1, $2)', [channel, payload], { prepare: true })
    },
    async end() {
      await sql.end({ timeout: 5 })
    },
  }
}

const PAD = 'lorem ipsum dolor sit amet, consectetur adipiscing elit '
/** A batch of a turn's events as the store would send it (JSON text), seqs from `first`. */
function eventsJson(first: number, turn: number): string {
  const at = new Date().toISOString()
  const types = ['turn_started', 'tool_call', 'tool_result', 'assistant_message', 'turn_completed']
  const rows = types.map((type, i) => ({
    seq: first + i,
    turn,
    type,
    at,
    data: { text: `${type} ${turn} ${PAD.repeat(4)}`, usage: { input_tokens: 10 } },
  }))
  return JSON.stringify(rows)
}
/** A snapshot of a session some turns in (about 6 KB of JSON). */
const snapshotJson = (lastSeq: number) =>
  JSON.stringify({
    last_seq: lastSeq,
    status: 'active',
    messages: Array.from({ length: 24 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', text: PAD.repeat(4) })),
  })

interface Phase {
  seconds: number
  ops: number
  latency: number[]
}

async function timed(lanes: number, perLane: number, op: (lane: number, i: number) => Promise<void>): Promise<Phase> {
  const latency: number[] = []
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      for (let i = 0; i < perLane; i++) {
        const s = performance.now()
        await op(lane, i)
        latency.push(performance.now() - s)
      }
    }),
  )
  return { seconds: (performance.now() - t0) / 1000, ops: lanes * perLane, latency }
}

let run_ = 0
async function measure(d: Driver): Promise<{ tx: Phase; one: Phase; read: Phase; notify: number[] }> {
  const tag = `r${run_++}`
  const commitPhase = (kind: 'tx' | 'one') =>
    timed(SESSIONS, COMMITS, async (lane, i) => {
      const sid = `${tag}-${kind}-${lane}`
      const last = i * EVENTS_PER_COMMIT
      const f = kind === 'tx' ? d.txCommit : d.oneStatement
      await f(`tenant-${lane % 4}`, sid, last, 1, snapshotJson(last + EVENTS_PER_COMMIT), eventsJson(last + 1, i + 1))
    })
  const tx = await commitPhase('tx')
  const one = await commitPhase('one')
  // Replays of 20 events from sessions of COMMITS × 5 events, at random offsets.
  const read = await timed(SESSIONS, READS / SESSIONS, async (lane) => {
    const after = Math.floor(Math.random() * (COMMITS * EVENTS_PER_COMMIT - 20))
    const rows = await d.read(`tenant-${lane % 4}`, `${tag}-one-${lane}`, after, after + 20)
    if (rows.length !== 20) throw new Error(`read ${rows.length} rows`)
  })
  // NOTIFY → delivery, one at a time (the payload carries its send time).
  const channel = `bench_${tag}`
  const notify: number[] = []
  let waiting: (() => void) | undefined
  await d.listen(channel, (payload) => {
    notify.push(performance.now() - Number(payload))
    waiting?.()
  })
  for (let i = 0; i < NOTIFIES; i++) {
    const got = new Promise<void>((r) => (waiting = r))
    await d.notify(channel, String(performance.now()))
    await got
  }
  return { tx, one, read, notify }
}

/**
 * Diagnostic: the session store itself (PgSessionRepository over `pg`) committing turns — three
 * events (turn_started, assistant_message, turn_completed) and the whole snapshot, as the service
 * commits a turn that the model answered at once — SESSIONS sessions at a time, in a database of
 * its own (the store's schema, applied by its migrations). Commits are built before timing.
 */
async function storePhase(url: string): Promise<Phase> {
  const repo = await PgSessionRepository.open({ url, poolSize: POOL, replicaId: 'bench', idempotencyTtlMs: 3_600_000 })
  try {
    const lanes = Array.from({ length: SESSIONS }, (_, lane) => {
      const log = new SessionLog(sessionId(10_000 + lane), config(`tenant-${lane % 4}`))
      const create = log.create()
      const turns = Array.from({ length: COMMITS }, (_, i) => log.turn(`question ${i} ${PAD.repeat(4)}`))
      return { create, turns }
    })
    for (const l of lanes) await repo.commit(l.create.events, l.create.record)
    return await timed(SESSIONS, COMMITS, async (lane, i) => {
      const c = lanes[lane]!.turns[i]!
      await repo.commit(c.events, c.record)
    })
  } finally {
    await repo.close()
  }
}

export async function run(): Promise<BenchResult> {
  const t0 = performance.now()
  const db = await tempDatabase(undefined, 'driver')
  const url = db.url
  const runs: Record<'pg' | 'postgres', Awaited<ReturnType<typeof measure>>[]> = { pg: [], postgres: [] }
  let serverVersion = ''
  let store: Phase | undefined
  const storeDb = await tempDatabase(undefined, 'driver_store')
  try {
    const setup = new pg.Client({ connectionString: url })
    await setup.connect()
    await setup.query(SCHEMA)
    serverVersion = (await setup.query('SHOW server_version')).rows[0].server_version
    for (const k of ['fsync', 'synchronous_commit']) serverVersion += `, ${k} ${(await setup.query(`SHOW ${k}`)).rows[0][k]}`
    await setup.end()
    for (let rep = 0; rep < REPS; rep++) {
      for (const make of rep % 2 ? [postgresJsDriver, pgDriver] : [pgDriver, postgresJsDriver]) {
        const d = make(url)
        try {
          runs[d.name as 'pg' | 'postgres'].push(await measure(d))
        } finally {
          await d.end()
        }
      }
    }
    store = await storePhase(storeDb.url)
  } finally {
    await storeDb.drop()
    await db.drop()
  }

  const rate = (rs: Phase[]) => rs.reduce((a, r) => a + r.ops, 0) / rs.reduce((a, r) => a + r.seconds, 0)
  const pct = (xs: number[], p: number) => percentile(Float64Array.from(xs).sort(), p)
  const all = (name: 'pg' | 'postgres', k: 'tx' | 'one' | 'read') => runs[name].map((r) => r[k])
  const lat = (name: 'pg' | 'postgres', k: 'tx' | 'one' | 'read') => all(name, k).flatMap((r) => r.latency)
  const notes = (name: 'pg' | 'postgres') => runs[name].flatMap((r) => r.notify)
  const metrics = [
    metric('turn commit, transaction: commits/s', rate(all('postgres', 'tx')), 'commits/s', rate(all('pg', 'tx'))),
    metric('turn commit, transaction: p50', pct(lat('postgres', 'tx'), 50), 'ms', pct(lat('pg', 'tx'), 50)),
    metric('turn commit, transaction: p99', pct(lat('postgres', 'tx'), 99), 'ms', pct(lat('pg', 'tx'), 99)),
    metric('turn commit, one statement: commits/s', rate(all('postgres', 'one')), 'commits/s', rate(all('pg', 'one'))),
    metric('turn commit, one statement: p50', pct(lat('postgres', 'one'), 50), 'ms', pct(lat('pg', 'one'), 50)),
    metric('turn commit, one statement: p99', pct(lat('postgres', 'one'), 99), 'ms', pct(lat('pg', 'one'), 99)),
    metric('read 20 events by seq range: reads/s', rate(all('postgres', 'read')), 'reads/s', rate(all('pg', 'read'))),
    metric('read 20 events by seq range: p99', pct(lat('postgres', 'read'), 99), 'ms', pct(lat('pg', 'read'), 99)),
    metric('LISTEN/NOTIFY round trip: p50', pct(notes('postgres'), 50), 'ms', pct(notes('pg'), 50)),
    metric('LISTEN/NOTIFY round trip: p99', pct(notes('postgres'), 99), 'ms', pct(notes('pg'), 99)),
    metric('diagnostic, vs pg one statement: PgSessionRepository turn commits/s', rate([store!]), 'commits/s', rate(all('pg', 'one'))),
    metric('diagnostic, vs pg one statement: PgSessionRepository p99', pct(store!.latency, 99), 'ms', pct(lat('pg', 'one'), 99)),
  ]
  const oneVsTx = (name: 'pg' | 'postgres') => rate(all(name, 'one')) / rate(all(name, 'tx'))
  // Not a race between the drivers: the target only says the one-statement commit is worth its SQL.
  const targets = [target('one-statement commit vs transaction, pg (commits/s ratio)', oneVsTx('pg'), '>=', 1, '×')]
  return {
    name: 'pg-driver',
    title: 'PostgreSQL drivers: postgres.js vs. node-postgres (pg) on a turn’s operations',
    description: [
      'The operations the PostgreSQL session store makes for a turn, through both drivers against the same database in the same run:',
      `a commit appending ${EVENTS_PER_COMMIT} jsonb event rows and upserting the session's snapshot under a fencing-token check (as an explicit`,
      'transaction, and as one statement: a data-modifying CTE that inserts the events only when the fenced upsert matched), a replay of',
      '20 events by seq range, and the NOTIFY → LISTEN delivery time. Same SQL text and parameters for both (prepared statements, JSON passed',
      'as text and cast); `synchronous_commit` on. Value column: postgres.js; baseline column: node-postgres (`pg`). The drivers alternate,',
      `${REPS} runs each; figures are over all runs.`,
    ].join(' '),
    config: {
      PostgreSQL: serverVersion,
      'concurrent writers (sessions)': SESSIONS,
      'pool size': POOL,
      'commits per writer and form': COMMITS,
      'reads per run': READS,
      'notifications per run': NOTIFIES,
      'runs per driver': REPS,
    },
    metrics,
    targets,
    pass: targets.every((t) => t.pass),
    notes: [
      `One statement vs transaction (commits/s): pg ${oneVsTx('pg').toFixed(2)}×, postgres.js ${oneVsTx('postgres').toFixed(2)}×.`,
      'The transaction form costs four round trips with `pg` (BEGIN, two statements, COMMIT, each awaited); postgres.js sends the same four.',
      'The NOTIFY is sent through the pool (`SELECT pg_notify`) and timed until the listening connection delivers it; one at a time.',
      'Both drivers run in this process; the database is a fresh one created for the run and dropped after it.',
      'Diagnostic rows: the session store itself (`PgSessionRepository.commit`, node-postgres) committing a turn — 3 events and the whole ' +
        "session snapshot as `json`, in the store's own schema and database — with the same writers and pool; the baseline column repeats " +
        '`pg` one-statement figure. Single run, after the driver runs.',
    ],
    date: new Date().toISOString(),
    durationSeconds: (performance.now() - t0) / 1000,
  }
}

if (isMain(import.meta.url)) {
  const r = await run()
  console.log(JSON.stringify(r, null, 2))
  process.exitCode = r.pass ? 0 : 1
}
