import type pg from 'pg'
import { JOURNAL_ROW_SPAN, streamPosition, type JournalRow, type JournalStart, type TenantJournal } from '../core/stores.js'
import type { PgAccess } from './pg-access.js'

/** Rows kept per tenant: older ones are pruned as new ones are written (as on LMDB). */
export const JOURNAL_KEEP = 250_000
/** A replica prunes a tenant's journal after this many of its own commits to the tenant. */
const PRUNE_EVERY = 1024

// Rows from the one holding `after` on, and the snapshot's xmin: the oldest transaction still
// running. A row is shown only below it — every transaction before it has ended, so no row can
// still appear before one shown. The snapshot is the statement's own: rows and xmin agree.
// Rows of the transaction holding `after` count only where they reach past it ($4: its offset in the
// span; a row's last id is `start + last - first`, or the span's last): a transaction's rows may be
// more than a page.
const ROWS = `SELECT xid::text AS xid, start, session_id, first, last, pg_snapshot_xmin(pg_current_snapshot())::text AS xmin
  FROM tenant_log WHERE tenant = $1 AND xid >= $2::text::xid8
    AND (xid > $2::text::xid8 OR least(start + (last - first), ${JOURNAL_ROW_SPAN - 1}) > $4)
  ORDER BY xid, start LIMIT $3`
const HORIZON = `SELECT pg_snapshot_xmin(s)::text AS xmin, pg_snapshot_xmax(s)::text AS xmax,
  (SELECT upto::text FROM tenant_log_pruned WHERE tenant = $1) AS pruned FROM pg_current_snapshot() AS s`
// Keeps the newest `$2` rows of the tenant and remembers up to where it pruned.
const PRUNE = `WITH cut AS (SELECT xid FROM tenant_log WHERE tenant = $1 ORDER BY xid DESC OFFSET $2 LIMIT 1),
  gone AS (DELETE FROM tenant_log WHERE tenant = $1 AND xid <= (SELECT xid FROM cut))
  INSERT INTO tenant_log_pruned (tenant, upto) SELECT $1, xid FROM cut
  ON CONFLICT (tenant) DO UPDATE SET upto = greatest(tenant_log_pruned.upto, excluded.upto)`

/**
 * The tenant journal on PostgreSQL (`tenant_log`: [tenant, xid, start] → [session, first, last]).
 * Each commit statement inserts a row per session it writes with the id of its own transaction
 * (pg-commit-batch.ts), so no counter is shared between commits and replicas do not wait on each
 * other. A transaction's rows of one tenant share its span of stream ids: each starts where the
 * one before it ends (`start`), and only the last may run past the span. Transaction ids
 * are handed out in the order transactions start, not commit: a row becomes readable once every
 * older transaction of the cluster has ended (`pg_snapshot_xmin`), and from then on nothing can
 * be committed before it. A row's base is its xid × JOURNAL_ROW_SPAN — a stream id stays below
 * 2^53 for the first 8.7 × 10^12 transactions of the cluster.
 *
 * Readers learn of new rows from this replica's commits and from the change feed's (`advanced`);
 * rows committed but not yet readable are asked for again by the reader (`waiting`).
 */
export class PgTenantJournal implements TenantJournal {
  private readonly listeners = new Set<(tenants: readonly string[]) => void>()
  /** This replica's commits per tenant since its last pruning. */
  private readonly commits = new Map<string, number>()
  private pruning: Promise<void> | null = null

  constructor(
    private readonly pool: pg.Pool,
    private readonly db: PgAccess,
    private readonly keep = JOURNAL_KEEP,
    /** Told of a failed pruning (it loses nothing: the next one removes what this one did not). */
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {}

  async start(tenant: string, after: number | undefined): Promise<JournalStart> {
    const r = await this.db.read(
      () => this.pool.query({ name: 'burrow_journal_horizon', text: HORIZON, values: [tenant] }),
      'the tenant journal',
    )
    const row = r.rows[0] as { xmin: string; xmax: string; pruned: string | null }
    // From now: every row from the oldest transaction still running on (some may be a moment old).
    const now = Number(row.xmin) * JOURNAL_ROW_SPAN - 1
    if (after === undefined) return { after: now }
    const xid = Math.floor(after / JOURNAL_ROW_SPAN)
    // An xid not handed out yet: a position this database never gave (another database).
    if (xid >= Number(row.xmax)) return { after: now, truncated: { first: now + 1, reason: 'unknown_position' } }
    const pruned = row.pruned === null ? -1 : Number(row.pruned)
    if (xid <= pruned) {
      const first = (pruned + 1) * JOURNAL_ROW_SPAN
      return { after: first - 1, truncated: { first, reason: 'events_unavailable' } }
    }
    return { after }
  }

  async rowsAfter(tenant: string, after: number, limit: number): Promise<{ rows: JournalRow[]; waiting: boolean }> {
    const xid = Math.max(0, Math.floor(after / JOURNAL_ROW_SPAN))
    const values = [tenant, String(xid), limit + 1, after < 0 ? -1 : after - xid * JOURNAL_ROW_SPAN]
    const r = await this.db.read(() => this.pool.query({ name: 'burrow_journal_rows', text: ROWS, values }), 'the tenant journal')
    const rows: JournalRow[] = []
    for (const row of r.rows as Array<{ xid: string; start: number; session_id: string; first: string; last: string; xmin: string }>) {
      const xid = Number(row.xid)
      if (xid >= Number(row.xmin)) return { rows: rows.slice(0, limit), waiting: true }
      const j: JournalRow = {
        base: xid * JOURNAL_ROW_SPAN + row.start,
        span: JOURNAL_ROW_SPAN - row.start,
        sessionId: row.session_id,
        first: Number(row.first),
        last: Number(row.last),
      }
      if (streamPosition(j, j.last).pos > after) rows.push(j) // else delivered whole already
    }
    return { rows: rows.slice(0, limit), waiting: false }
  }

  onAdvance(fn: (tenants: readonly string[]) => void): () => void {
    this.listeners.add(fn)
    return () => this.listeners.delete(fn)
  }

  /** A commit to the tenant's journal was made, here (`own`) or on another replica. */
  advanced(tenant: string, own: boolean): void {
    for (const fn of this.listeners) {
      try {
        fn([tenant])
      } catch {
        /* a listener's failure is its own */
      }
    }
    if (!own) return
    const n = (this.commits.get(tenant) ?? 0) + 1
    this.commits.set(tenant, n % PRUNE_EVERY)
    if (n >= PRUNE_EVERY && !this.pruning) this.pruning = this.prune(tenant).finally(() => (this.pruning = null))
  }

  /** Resolves once a pruning in progress has ended (close, tests). */
  async idle(): Promise<void> {
    await this.pruning
  }

  private async prune(tenant: string): Promise<void> {
    try {
      await this.pool.query({ name: 'burrow_journal_prune', text: PRUNE, values: [tenant, this.keep] })
    } catch (err) {
      this.onError(err)
    }
  }
}
