import type pg from 'pg'
import type { EventEnvelope } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { IdempotencyWrite, ProjectionState, ProjectionWriterLease, SessionRepository } from '../core/stores.js'
import type { Page, SessionQuery, SessionSummary } from '../core/wire.js'
import { FILTER_SCAN_BUDGET, hasSessionFilter, matchesSession } from '../core/session-filter.js'
import { decodeCursor, encodeCursor } from './cursor.js'
import { PgAccess } from './pg-access.js'
import { PgCommitWriter } from './pg-commit-writer.js'
import { PgIdempotencyStore } from './pg-idempotency-store.js'
import { migrate, type Migrated } from './pg-migrate.js'
import { PgLeases } from './pg-leases.js'
import { PgProjectionLease } from './pg-projection-lease.js'
import { assembleRecord, HISTORY_SQL, historyRows, SESSION_ROW_SQL, type StoredSessionRow } from './pg-session-layout.js'
import { openPool } from './pg-pool.js'
import { PgTenantJournal } from './pg-tenant-journal.js'

export interface PgSessionRepositoryOptions {
  /** A `postgres://` URL. */
  url: string
  poolSize: number
  /** This replica's name (the connections' application_name). */
  replicaId: string
  idempotencyTtlMs: number
  /** Told when the store stops taking writes (with the error) and when it takes them again. */
  onHealth?: (writable: boolean, err?: unknown) => void
  /** How long a session's lease lasts unless renewed (BURROW_LEASE_MS). */
  leaseMs?: number
  /** Tenant journal rows kept per tenant (default JOURNAL_KEEP; tests prune sooner). */
  journalKeep?: number
  /** Told of a failure that loses nothing (a pruning of the tenant journal). */
  onError?: (err: unknown, what: string) => void
}

const LIST = `SELECT session_id, status, created_at, updated_at, model, metadata, turn_count, last_seq, forked_from FROM sessions
  WHERE tenant = $1 AND session_id < $2 ORDER BY session_id DESC LIMIT $3`
const LIST_STATUS = `SELECT session_id, status, created_at, updated_at, model, metadata, turn_count, last_seq, forked_from FROM sessions
  WHERE tenant = $1 AND status = $4 AND session_id < $2 ORDER BY session_id DESC LIMIT $3`
// A session's rows are keyed by (tenant, session_id); reads by id find the tenant in the same statement.
const READ_AFTER = `SELECT seq, turn, type, at, data FROM events
  WHERE tenant = (SELECT tenant FROM sessions WHERE session_id = $1 LIMIT 1) AND session_id = $1 AND seq > $2 AND seq <= $3
  ORDER BY seq LIMIT $4`
// A projected session's checkpoint becomes -1, the mark that the projection writer — maybe another
// replica, whose directory holds the files — still has them to remove (pending(), then removed()).
const PURGE = `WITH e AS (DELETE FROM events WHERE tenant = $1 AND session_id = $2),
  i AS (DELETE FROM idempotency WHERE tenant = $1 AND session_id = $2),
  p AS (UPDATE projections SET checkpoint = -1 WHERE tenant = $1 AND session_id = $2),
  l AS (DELETE FROM leases WHERE tenant = $1 AND session_id = $2),
  u AS (DELETE FROM session_usage WHERE tenant = $1 AND session_id = $2)
  DELETE FROM sessions WHERE tenant = $1 AND session_id = $2`
const TOP = '\uffff' // sorts after every session id
/** Candidates read at a time when the list filters by metadata. */
const METADATA_PAGE = 500

function summaryOf(row: Record<string, any>): SessionSummary {
  return {
    session_id: row.session_id,
    status: row.status,
    created_at: row.created_at,
    updated_at: row.updated_at,
    model: row.model,
    metadata: row.metadata,
    turn_count: row.turn_count,
    last_seq: Number(row.last_seq),
    forked_from: row.forked_from ?? null,
  }
}

/**
 * The list with time filters: each one a condition on the tenant's rows (`values` holds $1–$3, and
 * $4 the status when there is one). Metadata is matched here, not in SQL: PostgreSQL's json
 * operators refuse a document holding `\u0000`, which user text may (pg-schema.ts).
 */
function filteredList(q: SessionQuery, values: unknown[]): { text: string; values: unknown[] } {
  const where = ['tenant = $1', 'session_id < $2']
  const param = (v: unknown) => `$${values.push(v)}`
  if (q.status) where.push('status = $4')
  if (q.created_after) where.push(`created_at >= ${param(q.created_after)}`)
  if (q.created_before) where.push(`created_at < ${param(q.created_before)}`)
  if (q.updated_after) where.push(`updated_at >= ${param(q.updated_after)}`)
  if (q.updated_before) where.push(`updated_at < ${param(q.updated_before)}`)
  return {
    text: `SELECT session_id, status, created_at, updated_at, model, metadata, turn_count, last_seq, forked_from FROM sessions
      WHERE ${where.join(' AND ')} ORDER BY session_id DESC LIMIT $3`,
    values,
  }
}

/**
 * Sessions in PostgreSQL (docs/scaling.md). The same semantics as the LMDB repository: gapless
 * seqs per session, a commit stores its events and the snapshot they produced or nothing, and is
 * refused when its events do not follow the stored log. A commit is one statement, grouped per
 * session (PgCommitWriter); it resolves once PostgreSQL has committed it (with its
 * `synchronous_commit`, on by default: flushed to the WAL). A database that cannot be reached is
 * `STORE_UNAVAILABLE`, never a crash; the pool reconnects by itself and `writable()` turns true
 * again once a write succeeds.
 */
export class PgSessionRepository implements SessionRepository {
  readonly idempotency: PgIdempotencyStore
  readonly leases: PgLeases
  /** Elects the one replica that writes the projection files (BURROW_PROJECTION=on). */
  readonly projectionWriter: ProjectionWriterLease
  /** The order of the tenants' commits: the tenant stream resumes from it. */
  readonly journal: PgTenantJournal
  private readonly writer: PgCommitWriter
  private committedListener: ((tenant: string, sessionId: string, first: number, last: number) => void) | null = null
  private closing: Promise<void> | null = null
  private deletedListener: ((tenant: string, sessionId: string) => void) | null = null

  private constructor(
    private readonly pool: pg.Pool,
    private readonly db: PgAccess,
    opts: PgSessionRepositoryOptions,
    /** What start-up's migration found and applied. */
    readonly migrated: Migrated,
  ) {
    this.writer = new PgCommitWriter(pool, db.health, opts.replicaId)
    this.journal = new PgTenantJournal(pool, db, opts.journalKeep, (err) => opts.onError?.(err, 'pruning the tenant journal'))
    this.writer.onCommitted = (tenant, sessionId, first, last) => {
      this.journal.advanced(tenant, true)
      this.committedListener?.(tenant, sessionId, first, last)
    }
    this.leases = new PgLeases(pool, db, opts.replicaId, opts.leaseMs ?? 10_000)
    this.projectionWriter = new PgProjectionLease(pool, db, opts.replicaId, opts.leaseMs ?? 10_000)
    this.idempotency = new PgIdempotencyStore(pool, db, opts.idempotencyTtlMs, opts.replicaId, opts.leaseMs ?? 10_000)
  }

  /** Connects and brings the schema up to date (pg-migrate.ts); rejects, closing the pool, when either fails. */
  static async open(opts: PgSessionRepositoryOptions): Promise<PgSessionRepository> {
    let db: PgAccess | undefined
    const pool = openPool({
      url: opts.url,
      size: opts.poolSize,
      applicationName: `burrow ${opts.replicaId}`,
      onIdleError: () => db?.connectionLost(),
    })
    db = new PgAccess(pool, opts.onHealth)
    try {
      const repo = new PgSessionRepository(pool, db, opts, await migrate(pool))
      await repo.leases.releaseOwned()
      await repo.idempotency.releaseOwned()
      return repo
    } catch (err) {
      db.close()
      await pool.end().catch(() => undefined)
      throw err
    }
  }

  writable(): boolean {
    return this.db.writable()
  }

  /** Tells `listener` of every session deletion once PostgreSQL committed it (the change feed). */
  onDeleted(listener: (tenant: string, sessionId: string) => void): void {
    this.deletedListener = listener
  }

  /** Tells `listener` of every commit once PostgreSQL committed it (the replicas' change feed sends its NOTIFY). */
  onCommitted(listener: (tenant: string, sessionId: string, first: number, last: number) => void): void {
    this.committedListener = listener
  }

  /** Sessions outlive the process here. */
  requirePersistence(): void {}

  readonly events = {
    readAfter: async (sessionId: string, after: number, upTo = Infinity, limit = Infinity): Promise<EventEnvelope[]> => {
      await this.writer.settledFor(sessionId)
      if (limit <= 0 || upTo <= after) return []
      const values = [sessionId, after, upTo === Infinity ? Number.MAX_SAFE_INTEGER : upTo, limit === Infinity ? null : limit]
      const r = await this.db.read(() => this.pool.query({ name: 'burrow_read_after', text: READ_AFTER, values }), 'session events')
      return r.rows.map(
        (row) =>
          ({ seq: Number(row.seq), session_id: sessionId, turn: row.turn, type: row.type, at: row.at, data: row.data }) as EventEnvelope,
      )
    },
    lastSeq: async (sessionId: string): Promise<number> => {
      await this.writer.settledFor(sessionId)
      const r = await this.byId('SELECT last_seq FROM sessions WHERE session_id = $1 LIMIT 1', sessionId, 'the session')
      return r ? Number(r.last_seq) : 0
    },
  }

  readonly sessions = {
    get: async (sessionId: string): Promise<SessionRecord | undefined> => {
      await this.writer.settledFor(sessionId)
      const row = await this.byId(SESSION_ROW_SQL, sessionId, 'the session')
      if (!row) return undefined
      // Up to the row's last seq: what a commit made after the row was read does not belong to it.
      const values = [row.tenant, sessionId, row.messages_from, row.last_seq]
      const r = await this.db.read(() => this.pool.query({ name: 'burrow_history', text: HISTORY_SQL, values }), 'the session')
      return assembleRecord(sessionId, row as unknown as StoredSessionRow, historyRows(r.rows))
    },
    tenantOf: async (sessionId: string): Promise<string | undefined> => {
      await this.writer.settledFor(sessionId)
      const r = await this.byId('SELECT tenant FROM sessions WHERE session_id = $1 LIMIT 1', sessionId, 'the session')
      return r?.tenant as string | undefined
    },
    list: async (tenant: string, q: SessionQuery): Promise<Page<SessionSummary>> => {
      const after = decodeCursor(q.cursor)
      const limit = q.limit ?? 20
      const page = async (from: string, n: number): Promise<SessionSummary[]> => {
        const values: unknown[] = [tenant, from, n]
        if (q.status) values.push(q.status)
        const query = hasSessionFilter(q)
          ? filteredList(q, values)
          : q.status
            ? { name: 'burrow_list_status', text: LIST_STATUS, values }
            : { name: 'burrow_list', text: LIST, values }
        const r = await this.db.read(() => this.pool.query(query), 'the session list')
        return r.rows.map(summaryOf)
      }
      if (!q.metadata || Object.keys(q.metadata).length === 0) {
        const rows = await page(after ?? TOP, limit + 1)
        const items = rows.slice(0, limit)
        return { items, next_cursor: rows.length > limit ? encodeCursor(items.at(-1)!.session_id) : null }
      }
      // Metadata: matched a page of candidates at a time, at most FILTER_SCAN_BUDGET of them per request (as on LMDB).
      const items: SessionSummary[] = []
      let from = after ?? TOP
      for (let scanned = 0; ;) {
        const rows = await page(from, METADATA_PAGE)
        for (const s of rows) {
          if (matchesSession(s, q)) {
            if (items.length === limit) return { items, next_cursor: encodeCursor(items.at(-1)!.session_id) }
            items.push(s)
          }
          from = s.session_id
          if (++scanned === FILTER_SCAN_BUDGET) return { items, next_cursor: encodeCursor(from) }
        }
        if (rows.length < METADATA_PAGE) return { items, next_cursor: null }
      }
    },
    runningTurns: async (): Promise<string[]> => {
      // A live replica renews its leases: a turn whose lease expired (or that never had one) is a dead one's.
      const r = await this.db.read(
        () =>
          this.pool.query(
            `SELECT s.session_id FROM sessions s LEFT JOIN leases l ON l.tenant = s.tenant AND l.session_id = s.session_id
             WHERE s.running AND (l.expires_at IS NULL OR l.expires_at <= now())`,
          ),
        'running turns',
      )
      return r.rows.map((row) => row.session_id as string)
    },
    allIds: (): AsyncIterable<string> => {
      const page = (after: string) =>
        this.db.read(
          () => this.pool.query('SELECT session_id FROM sessions WHERE session_id > $1 ORDER BY session_id LIMIT 1000', [after]),
          'session ids',
        )
      return (async function* () {
        for (let after = ''; ;) {
          const r = await page(after)
          for (const row of r.rows) yield (after = row.session_id as string)
          if (r.rows.length < 1000) return
        }
      })()
    },
  }

  readonly projection: ProjectionState = {
    checkpoint: async (sid) => {
      const r = await this.byId('SELECT checkpoint FROM projections WHERE session_id = $1 LIMIT 1', sid, 'the projection checkpoint')
      return r ? Math.max(0, Number(r.checkpoint)) : 0
    },
    projected: async (sid, seq) => {
      await this.db.write(
        () =>
          this.pool.query(
            `INSERT INTO projections (tenant, session_id, checkpoint) SELECT tenant, session_id, $2 FROM sessions WHERE session_id = $1
             ON CONFLICT (tenant, session_id) DO UPDATE SET checkpoint = greatest(projections.checkpoint, excluded.checkpoint)`,
            [sid, seq],
          ),
        'the projection checkpoint',
      )
    },
    // Pending is derived, not marked: a session whose log is past its checkpoint (commits write nothing
    // for it), or a deleted one whose files are still to remove.
    pending: async () => {
      const r = await this.db.read(
        () =>
          this.pool.query(
            `SELECT s.session_id FROM sessions s LEFT JOIN projections p ON p.tenant = s.tenant AND p.session_id = s.session_id
             WHERE s.last_seq > coalesce(p.checkpoint, 0)
             UNION ALL SELECT session_id FROM projections WHERE checkpoint < 0`,
          ),
        'the projection state',
      )
      return r.rows.map((row) => row.session_id as string)
    },
    reset: async () => {
      // Marks of deleted sessions stay: their files may be in a directory a rebuild does not clear.
      await this.db.write(() => this.pool.query('DELETE FROM projections WHERE checkpoint >= 0'), 'the projection state')
    },
    removed: async (sid) => {
      await this.db.write(
        () => this.pool.query('DELETE FROM projections WHERE session_id = $1 AND checkpoint < 0', [sid]),
        'the projection state',
      )
    },
  }

  commit(events: readonly EventEnvelope[], snapshot: SessionRecord, fence = 0, outcomes?: readonly IdempotencyWrite[]): Promise<void> {
    return this.writer.commit(events, snapshot, fence, outcomes)
  }

  async deleteSession(sessionId: string, tenant: string): Promise<void> {
    await this.writer.settledFor(sessionId)
    await this.db.write(() => this.pool.query(PURGE, [tenant, sessionId]), `session ${sessionId}`)
    this.deletedListener?.(tenant, sessionId)
  }

  /** Drops idempotency records older than their TTL. */
  sweepIdempotency(): Promise<number> {
    return (this.idempotency as PgIdempotencyStore).sweep()
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.db.close()
      ;(this.idempotency as PgIdempotencyStore).close()
      await this.writer.idle()
      await this.journal.idle()
      await this.pool.end()
    })()
    return this.closing
  }

  private async byId(text: string, sessionId: string, what: string): Promise<Record<string, unknown> | undefined> {
    const r = await this.db.read(() => this.pool.query(text, [sessionId]), what)
    return r.rows[0]
  }
}
