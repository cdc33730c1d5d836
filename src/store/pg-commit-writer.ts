import type pg from 'pg'
import { BurrowError, leaseLost, storeUnavailable } from '../core/errors.js'
import type { EventEnvelope } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { WriteHealth } from '../core/write-health.js'
import { isConnectionError } from './pg-pool.js'
import { commitOrderError } from './commit-order.js'
import { commitParts } from './pg-session-layout.js'

/** Commits of one session waiting for its write in flight to end: merged into the next write. */
interface Queued {
  events: EventEnvelope[]
  snapshot: SessionRecord
  /** The fencing token of the newest commit merged in (they are one session's, made in order). */
  fence: number
  settled: Promise<void>
  resolve: () => void
  reject: (err: unknown) => void
}

/** One session's write path: at most one write in flight, and what queued up behind it. */
interface Lane {
  inflight: Queued | null
  /** The last seq written or being written by this process. */
  last: number
  queued: Queued | null
}

// One statement per commit, so a commit costs one round trip and is atomic without BEGIN/COMMIT
// (bench/pg-driver.bench.ts: 1.5–1.8× the commits/s of the same writes as a transaction). The events
// (the first row with the history messages they appended, pg-session-layout.ts) and usage chunks
// are inserted only when the session's row matched: a session's first commit inserts the row (none
// may exist), a later one updates it only where the stored log ends right before the batch, no
// commit with a newer fencing token has written, and — unless the batch stores the history whole —
// the stored history is the one the batch extends. A mismatch inserts nothing.
const EVENTS = `INSERT INTO events (tenant, session_id, seq, turn, type, at, data, m)
  SELECT $1, $2, u.seq, u.turn, u.type, u.at, u.data, u.m
  FROM unnest($14::bigint[], $15::integer[], $16::text[], $17::text[], $18::json[], $19::json[]) AS u(seq, turn, type, at, data, m)
  WHERE EXISTS (SELECT 1 FROM s)`
const USAGE = `usage_rows AS (INSERT INTO session_usage (tenant, session_id, chunk, usage)
  SELECT $1, $2, c.chunk, c.usage FROM unnest($20::integer[], $21::json[]) AS c(chunk, usage) WHERE EXISTS (SELECT 1 FROM s)
  ON CONFLICT (tenant, session_id, chunk) DO UPDATE SET usage = excluded.usage)`
// The tenant journal's row (pg-tenant-journal.ts): the statement's own transaction id orders it.
const JOURNAL = `journal_row AS (INSERT INTO tenant_log (tenant, xid, session_id, first, last)
  SELECT $1, pg_current_xact_id(), $2, $13::bigint + 1, $9 WHERE EXISTS (SELECT 1 FROM s))`
const FIRST_COMMIT = `WITH s AS (
  INSERT INTO sessions (tenant, session_id, status, created_at, updated_at, model, metadata, turn_count, last_seq, running, fence,
    head, config, notes, messages_from, message_count, generation, forked_from)
  SELECT $1, $2, $3, $4, $5, $6, $7::json, $8, $9, $10, $11, $12::json, $22::json, $23::json, 1, $24, $25, $26::json WHERE $13::bigint = 0
  ON CONFLICT DO NOTHING RETURNING 1),
${USAGE},
${JOURNAL}
${EVENTS}`
const NEXT_COMMIT = `WITH s AS (
  UPDATE sessions SET status = $3, created_at = $4, updated_at = $5, model = $6, metadata = $7::json, turn_count = $8,
    last_seq = $9, running = $10, fence = $11, head = $12::json, notes = coalesce($23::json, notes), config = coalesce($27::json, config),
    messages_from = CASE WHEN $22::boolean THEN $13::bigint + 1 ELSE messages_from END, message_count = $24, generation = $25
  WHERE tenant = $1 AND session_id = $2 AND last_seq = $13 AND fence <= $11
    AND ($22::boolean OR (message_count = $26 AND generation = $25))
  RETURNING 1),
${USAGE},
${JOURNAL}
${EVENTS}`

/**
 * The PostgreSQL write path. A session has one write in flight at a time (its seqs must land in
 * order); commits made meanwhile queue and go as one write when it ends — the events of all of
 * them and the snapshot after the last (a turn's start and its answer, when the model answered
 * first, cost one statement). Sessions write in parallel, each on a pool connection, and the
 * database's group commit shares WAL flushes between them.
 *
 * A write is all or nothing. One that fails rejects its commits and those queued behind it (their
 * events no longer follow the stored log); a connection failure is `STORE_UNAVAILABLE` and makes
 * the store unhealthy; a newer fencing token on the session is `STORE_UNAVAILABLE` with reason
 * `lease_lost` (another replica took the session over: errors.ts `leaseLost`); a log that does not
 * end where the batch starts, or a stored history other than the one the batch extends, is a
 * conflict (an Error: INTERNAL).
 */
export class PgCommitWriter {
  private readonly lanes = new Map<string, Lane>()
  private readonly inflight = new Set<Promise<void>>()
  /** Told of each write once committed (tenant, session, its first and last seq): the replicas' change feed. */
  onCommitted: ((tenant: string, sessionId: string, first: number, last: number) => void) | null = null

  constructor(
    private readonly pool: pg.Pool,
    private readonly health: WriteHealth,
  ) {}

  /** `fence`: the token of the session's lease the commit is made under (0: none). */
  commit(events: readonly EventEnvelope[], snapshot: SessionRecord, fence = 0): Promise<void> {
    const sid = snapshot.session_id
    if (events.length === 0) return this.settledFor(sid)
    let lane = this.lanes.get(sid)
    const next = lane ? (lane.queued ? lane.queued.events[lane.queued.events.length - 1]!.seq : lane.last) + 1 : events[0]!.seq
    const refused = commitOrderError(events, snapshot, next)
    if (refused) return Promise.reject(refused)
    if (lane?.queued) {
      for (const e of events) lane.queued.events.push(e)
      lane.queued.snapshot = snapshot
      lane.queued.fence = fence
      return lane.queued.settled
    }
    const q = queued(events.slice(), snapshot, fence)
    if (lane?.inflight) {
      lane.queued = q
      return q.settled
    }
    lane ??= { inflight: null, last: 0, queued: null }
    this.lanes.set(sid, lane)
    this.start(sid, lane, q)
    return q.settled
  }

  /** Resolves once the writes of `sid` started or queued so far have ended (either way). */
  async settledFor(sid: string): Promise<void> {
    const lane = this.lanes.get(sid)
    // A queued write starts only after the one in flight ends, and is rejected if that one fails.
    const p = lane?.queued?.settled ?? lane?.inflight?.settled
    if (p) await p.catch(() => undefined)
  }

  /** Resolves once every write started or queued so far has ended. */
  async idle(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight])
  }

  private start(sid: string, lane: Lane, q: Queued): void {
    lane.inflight = q
    lane.last = q.events[q.events.length - 1]!.seq
    const p = this.write(q).then(
      () => {
        this.onCommitted?.(q.snapshot.config.tenant, sid, q.events[0]!.seq, q.events[q.events.length - 1]!.seq)
        q.resolve()
        this.next(sid, lane, undefined)
      },
      (err: unknown) => {
        q.reject(err)
        this.next(sid, lane, err)
      },
    )
    this.inflight.add(p)
    void p.finally(() => this.inflight.delete(p))
  }

  private next(sid: string, lane: Lane, err: unknown): void {
    lane.inflight = null
    const q = lane.queued
    lane.queued = null
    if (q && err === undefined) return this.start(sid, lane, q)
    if (this.lanes.get(sid) === lane) this.lanes.delete(sid)
    if (!q) return
    // Fenced out, the commits behind are too, for the same reason: they get the same answer.
    if (err instanceof BurrowError && err.data?.reason === 'lease_lost') return q.reject(err)
    q.reject(storeUnavailable(new Error(`an earlier write of the session failed (${(err as Error).message})`), `events of session ${sid}`))
  }

  /** One statement: the events and what the snapshot as it is now adds to the stored one (the live record: serialized here, synchronously). */
  private async write(q: Queued): Promise<void> {
    const s = q.snapshot
    const sid = s.session_id
    const first = q.events[0]!.seq
    const last = q.events[q.events.length - 1]!.seq
    if (s.last_seq !== last) throw new Error(`snapshot of ${sid} is at seq ${s.last_seq}, log at ${last}`)
    const n = q.events.length
    const seqs = new Array<number>(n)
    const turns = new Array<number>(n)
    const types = new Array<string>(n)
    const ats = new Array<string>(n)
    const data = new Array<string>(n)
    for (let i = 0; i < n; i++) {
      const e = q.events[i]!
      seqs[i] = e.seq
      turns[i] = e.turn
      types[i] = e.type
      ats[i] = e.at
      data[i] = JSON.stringify(e.data)
    }
    const parts = commitParts(q.events, s)
    const m = new Array<string | null>(n).fill(null)
    m[0] = parts.part
    const values: unknown[] = [
      s.config.tenant,
      sid,
      s.status,
      s.created_at,
      s.updated_at,
      s.config.model,
      JSON.stringify(s.config.metadata ?? {}),
      s.turn_count,
      s.last_seq,
      s.open_turn?.state === 'running',
      q.fence,
      parts.head,
      first - 1,
      seqs,
      turns,
      types,
      ats,
      data,
      m,
      parts.usageChunks,
      parts.usageRows,
    ]
    // The first commit stores the configuration; a later one says whether it stores the history whole and what it extends.
    if (first === 1)
      values.push(
        JSON.stringify(s.config),
        parts.notes,
        s.messages.length,
        s.history_generation,
        JSON.stringify(s.config.forked_from ?? null),
      )
    else values.push(parts.whole, parts.notes, s.messages.length, s.history_generation, parts.from, parts.config)
    let written: number
    try {
      const r = await this.pool.query(
        first === 1
          ? { name: 'burrow_first_commit', text: FIRST_COMMIT, values }
          : { name: 'burrow_next_commit', text: NEXT_COMMIT, values },
      )
      written = r.rowCount ?? 0
    } catch (err) {
      if ((err as { code?: string }).code === '23505') throw conflict(sid, first)
      if (isConnectionError(err)) this.health.failed(err)
      throw storeUnavailable(err, `events of session ${sid}`)
    }
    this.health.succeeded()
    if (written !== n) throw await this.refusal(s.config.tenant, sid, first, q.fence)
  }

  /**
   * Why a write stored nothing: another replica's lease (a newer fencing token on the session's
   * row), or a log or history this process had wrong. One read, on this path only: the statement
   * itself cannot say which of its conditions failed. `fence` only grows, so a newer token read
   * after the refusal was there at the refusal or came after it — either way the session is
   * another replica's now, and none of this process's writes under its old token can land.
   */
  private async refusal(tenant: string, sid: string, first: number, fence: number): Promise<Error> {
    let row: { fence: string; last_seq: string } | undefined
    try {
      const r = await this.pool.query({ name: 'burrow_commit_refusal', text: REFUSAL, values: [tenant, sid] })
      row = r.rows[0] as typeof row
    } catch (err) {
      if (isConnectionError(err)) this.health.failed(err)
      return storeUnavailable(err, `events of session ${sid}`)
    }
    if (row && Number(row.fence) > fence) return leaseLost(sid)
    const at = row ? `seq ${row.last_seq}` : 'no session'
    return new Error(
      `commit out of order for ${sid}: the batch starts at seq ${first}, the stored log has ${at} (or the stored history is not the one the commit extends)`,
    )
  }
}

const REFUSAL = 'SELECT fence, last_seq FROM sessions WHERE tenant = $1 AND session_id = $2'

function conflict(sid: string, first: number): Error {
  return new Error(`commit out of order for ${sid}: the stored log already holds seq ${first} or after`)
}

function queued(events: EventEnvelope[], snapshot: SessionRecord, fence: number): Queued {
  let resolve!: () => void
  let reject!: (err: unknown) => void
  const settled = new Promise<void>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { events, snapshot, fence, settled, resolve, reject }
}
