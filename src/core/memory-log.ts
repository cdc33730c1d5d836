import type { MemoryEntry } from './memory-store.js'
import type { IdempotencyStore, IdempotencyWrite } from './stores.js'

/**
 * Memory entries kept in a shared database (PostgreSQL) that several replicas read: the truth a
 * replica's local copy (keyword statistics, HNSW index) is fed from.
 *
 * Every tenant's entries are numbered by `label`, consecutively in commit order (a commit holds
 * the tenant's row lock, so a reader that sees label n sees every committed label below it);
 * labels are never reused. Deletions are numbered per tenant too (`deletions`), so a reader
 * replays exactly the ones it has not seen.
 */
export interface MemoryLog {
  /**
   * Commits every batch in one transaction (all or none) and returns each batch's first label
   * (its entries get that label and the next ones, in order). `postings` is the batch's keyword
   * postings, opaque here, encoded for labels 0..n−1 (relative to the first). Refuses entries of
   * a deleted session (`{ deletedSession }`, nothing written); throws `STORE_UNAVAILABLE` when
   * the database cannot take the commit.
   */
  append(
    batches: readonly LogBatch[],
    outcome?: () => IdempotencyWrite | undefined,
  ): Promise<{ first: number[] } | { deletedSession: string }>
  /**
   * Where idempotent adds' outcomes are kept: `append` writes the one `outcome` gives there, in its
   * transaction, once nothing refused the batches (not called for a refused add).
   */
  readonly idempotency?: IdempotencyStore
  /**
   * Removes one entry of the tenant (by id), or every entry of a session and marks the session
   * deleted (nothing is added to it again). Returns the labels removed.
   */
  remove(tenant: string, what: { id: string } | { sessionId: string }): Promise<number[]>
  /** Each tenant's counters (tenants with none are left out): one cheap read for a poll. */
  heads(tenants: readonly string[]): Promise<Map<string, TenantHead>>
  /**
   * What changed for the tenant since `since` (one consistent snapshot). When deletions after
   * `since.deletions` were forgotten (`pruneDeletions`) and the caller holds labels, `forgotten` is
   * set and `removed` lists every label below `since.next` the tenant no longer has instead.
   */
  changes(tenant: string, since: { next: number; deletions: number }): Promise<TenantChanges>
  /**
   * Forgets the deletions recorded more than the retention ago, in batches, and returns how many.
   * Safe to run from every replica at once. A reader that had not seen them learns it from
   * `changes` (`forgotten`).
   */
  pruneDeletions(): Promise<number>
  /** A page of the tenant's entries after `after` in label order, optionally one session's. */
  entries(tenant: string, q: { after: number; limit: number; sessionId?: string | undefined }): Promise<LoggedEntry[]>
  /** One entry by id (another tenant's id is unknown). */
  entry(tenant: string, id: string): Promise<LoggedEntry | null>
  /** How many entries the tenant has. */
  count(tenant: string): Promise<number>
  /** False while the database cannot be reached or written (probes by itself, as WriteHealth does). */
  healthy(): boolean
  close(): Promise<void>
}

export interface LogBatch {
  tenant: string
  entries: ReadonlyArray<{ entry: MemoryEntry; len: number }>
  postings: Uint8Array
}

export interface LoggedEntry {
  label: number
  entry: MemoryEntry
  /** The content's length in tokens (BM25). */
  len: number
}

export interface TenantHead {
  /** Names this history of the tenant: a database recreated (or restored) gives it another one. */
  incarnation: string
  /** Labels below this are committed (or deleted). */
  next: number
  /** Deletions recorded so far. */
  deletions: number
}

export interface TenantChanges extends TenantHead {
  /** Labels deleted since (in the order deleted); when `forgotten`, every label below `since.next` that is gone, ascending. */
  removed: number[]
  /** Some deletions after `since.deletions` are no longer recorded: `removed` was found by comparing labels instead. */
  forgotten: boolean
  /** Entries committed at or above `since.next`, in label order. */
  added: LoggedEntry[]
  /** Posting blocks starting at or above `since.next`: first label → bytes (encoded from that label). */
  blocks: Array<{ first: number; postings: Uint8Array }>
}
