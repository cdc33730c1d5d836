import type { EventEnvelope } from '../core/events.js'
import { JOURNAL_ROW_SPAN, streamPosition, type JournalRow, type JournalStart, type TenantJournal } from '../core/stores.js'
import type { BurrowDbs } from './lmdb-dbs.js'
import { json, type Op } from './lmdb-layout.js'

/** Rows kept per tenant (about 40 bytes each): older ones are pruned as new ones are written. */
export const JOURNAL_KEEP = 250_000
/** Pruning runs when a tenant's position reaches a multiple of this, removing at most this many rows. */
const PRUNE_EVERY = 1024

/** A row and its position: its base is position × JOURNAL_ROW_SPAN. */
export interface LmdbJournalRow extends JournalRow {
  pos: number
}

/**
 * The tenant journal on LMDB (`tenant_log`: [tenant, pos] → [session, first, last]). Rows are
 * appended by the batch writer inside the batch's transaction — so a row exists exactly when
 * its events do, and positions follow commit order (one writer, batches commit in order).
 */
export class LmdbTenantJournal implements TenantJournal {
  /** The last position given out per tenant (read from the database on first use). */
  private readonly next = new Map<string, number>()
  /**
   * The last position per tenant whose batch is committed *and* durable (flushed, with fsync):
   * readers see no further, so nothing is streamed that a power loss could take back. A tenant
   * this process has not written to has the database's last row.
   */
  private readonly durable = new Map<string, number>()
  private readonly listeners = new Set<(tenants: readonly string[]) => void>()

  constructor(
    private readonly dbs: BurrowDbs,
    private readonly keep = JOURNAL_KEEP,
  ) {}

  /**
   * Appends the rows of one session's committed events to `ops` (inside the batch's
   * transaction); returns the last position given out.
   */
  append(tenant: string, sessionId: string, events: readonly EventEnvelope[], ops: Op[]): number {
    if (!this.durable.has(tenant)) this.durable.set(tenant, this.stored(tenant))
    let pos = 0
    for (let i = 0; i < events.length; i += JOURNAL_ROW_SPAN) {
      const first = events[i]!.seq
      const last = events[Math.min(events.length, i + JOURNAL_ROW_SPAN) - 1]!.seq
      pos = (this.next.get(tenant) ?? this.stored(tenant)) + 1
      this.next.set(tenant, pos)
      ops.push({ db: this.dbs.tenantLog, key: [tenant, pos], value: json([sessionId, first, last]) })
      if (pos % PRUNE_EVERY === 0 && pos > this.keep)
        for (const key of this.dbs.tenantLog.getKeys({ start: [tenant, 0], end: [tenant, pos - this.keep + 1], limit: PRUNE_EVERY }))
          ops.push({ db: this.dbs.tenantLog, key })
    }
    return pos
  }

  /** A batch that appended rows failed: what it gave out is read again from the database. */
  forget(tenants: Iterable<string>): void {
    for (const t of tenants) this.next.delete(t)
  }

  /** A batch committed and is durable: its rows become readable, and the listeners are told which tenants advanced. */
  advanced(heads: ReadonlyMap<string, number>): void {
    if (heads.size === 0) return
    for (const [tenant, pos] of heads) if (pos > (this.durable.get(tenant) ?? 0)) this.durable.set(tenant, pos)
    const tenants = [...heads.keys()]
    for (const fn of this.listeners) {
      try {
        fn(tenants)
      } catch {
        /* a listener's failure is its own */
      }
    }
  }

  async start(tenant: string, after: number | undefined): Promise<JournalStart> {
    const head = this.head(tenant)
    if (after === undefined) return { after: (head + 1) * JOURNAL_ROW_SPAN - 1 }
    const pos = Math.floor(after / JOURNAL_ROW_SPAN)
    // A position this journal never gave out (another data directory): from now, said so.
    if (pos > head)
      return { after: (head + 1) * JOURNAL_ROW_SPAN - 1, truncated: { first: (head + 1) * JOURNAL_ROW_SPAN, reason: 'unknown_position' } }
    const oldest = this.oldest(tenant)
    if (oldest > 1 && pos < oldest)
      return { after: oldest * JOURNAL_ROW_SPAN - 1, truncated: { first: oldest * JOURNAL_ROW_SPAN, reason: 'events_unavailable' } }
    return { after }
  }

  async rowsAfter(tenant: string, after: number, limit: number): Promise<{ rows: JournalRow[]; waiting: boolean }> {
    const rows = this.rowsFrom(tenant, Math.floor(after / JOURNAL_ROW_SPAN), limit + 1)
    if (rows.length > 0 && streamPosition(rows[0]!, rows[0]!.last).pos <= after) rows.shift() // delivered whole already
    return { rows: rows.slice(0, limit), waiting: false }
  }

  /** Rows of the tenant with `pos >= from` (up to the durable head), ascending, at most `limit`. */
  rowsFrom(tenant: string, from: number, limit: number): LmdbJournalRow[] {
    const out: LmdbJournalRow[] = []
    const head = this.head(tenant)
    if (from > head) return out
    for (const { key, value } of this.dbs.tenantLog.getRange({ start: [tenant, from], end: [tenant, head + 1], limit })) {
      const [sessionId, first, last] = value as [string, number, number]
      const pos = (key as [string, number])[1]
      out.push({ pos, base: pos * JOURNAL_ROW_SPAN, sessionId, first, last })
    }
    return out
  }

  /** The position of the tenant's newest readable row (0: none yet). */
  head(tenant: string): number {
    return this.durable.get(tenant) ?? this.stored(tenant)
  }

  /** The last row in the database (committed; durable unless this process wrote it). */
  private stored(tenant: string): number {
    for (const key of this.dbs.tenantLog.getKeys({ start: [tenant, Infinity], end: [tenant, 0], reverse: true, limit: 1 }))
      return (key as [string, number])[1]
    return 0
  }

  /** The position of the tenant's oldest kept row (0: none). */
  oldest(tenant: string): number {
    for (const key of this.dbs.tenantLog.getKeys({ start: [tenant, 0], end: [tenant, Infinity], limit: 1 }))
      return (key as [string, number])[1]
    return 0
  }

  onAdvance(fn: (tenants: readonly string[]) => void): () => void {
    this.listeners.add(fn)
    return () => this.listeners.delete(fn)
  }
}
