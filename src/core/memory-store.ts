import type { IdempotencyStore, IdempotencyWrite } from './stores.js'

/** One remembered passage, with provenance. */
export interface MemoryEntry {
  id: string
  tenant: string
  content: string
  session_id: string | null
  turn: number | null
  /** The seq of the event the passage came from (the verbatim source in the log). */
  seq: number | null
  created_at: string
  metadata?: Record<string, string>
}

export type NewMemoryEntry = Omit<MemoryEntry, 'id' | 'created_at'>

/** The idempotency outcome of an add, from the entries it stores (ids given), committed with them. */
export type MemoryAddOutcome = (added: readonly MemoryEntry[]) => IdempotencyWrite | undefined

export interface MemoryHit {
  entry: MemoryEntry
  score: number
}

/** Entries whose metadata has every given KEY=VALUE pair (an empty or absent filter matches all). */
export type MetadataFilter = Readonly<Record<string, string>>

export function matchesMetadata(metadata: Readonly<Record<string, string>> | undefined, filter: MetadataFilter | undefined): boolean {
  if (!filter) return true
  for (const [k, v] of Object.entries(filter)) if (metadata?.[k] !== v) return false
  return true
}

export interface MemoryListQuery {
  /** `next_cursor` of the previous page (opaque; the store issued it). */
  cursor?: string | undefined
  limit: number
  sessionId?: string | undefined
  metadata?: MetadataFilter | undefined
}

/** A page of entries in insertion order (oldest first); `next_cursor` is null on the last page. */
export interface MemoryPage {
  items: MemoryEntry[]
  next_cursor: string | null
}

export interface MemoryQuery {
  tenant: string
  text: string
  limit: number
  /** Only this session's entries. */
  sessionId?: string | undefined
  /** Ranking: both signals fused (default), or one alone (for evaluation). */
  mode?: 'hybrid' | 'vector' | 'keyword'
  /** Only entries matching every pair; applied before ranking, so up to `limit` matching hits come back. */
  metadata?: MetadataFilter | undefined
}

/**
 * Semantic memory, strictly tenant-scoped: a query never returns another tenant's
 * entries. Scores are in 0..1, higher is better; hits are ordered best first.
 */
export interface MemoryStore {
  /**
   * Stores the entries (all or none). Throws `STORE_UNAVAILABLE` when they cannot be made
   * durable, and `SESSION_NOT_FOUND` for entries of a deleted session; once they are
   * committed it does not throw — maintaining a search index afterwards is the store's
   * own business.
   */
  add(entries: readonly NewMemoryEntry[], outcome?: MemoryAddOutcome): Promise<MemoryEntry[]>
  /**
   * Where the outcomes of idempotent adds are kept: `add` commits the one `outcome` gives in the
   * same transaction as the entries. Absent: the store cannot, and `outcome` is not called.
   */
  readonly idempotency?: IdempotencyStore
  search(q: MemoryQuery): Promise<MemoryHit[]>
  /**
   * Removes a session's entries; returns how many. Session ids are never reused, so the
   * session stays deleted: a later `add` of entries for it is `SESSION_NOT_FOUND`.
   */
  deleteSession(tenant: string, sessionId: string): Promise<number>
  count(tenant: string): Promise<number>
  /** One entry of the tenant, or null (another tenant's id answers like an unknown one). */
  get(tenant: string, id: string): Promise<MemoryEntry | null>
  /**
   * Removes one entry of the tenant (from every index: keyword, vector, session); returns
   * whether it existed. Throws `STORE_UNAVAILABLE` when the removal cannot be made durable.
   */
  delete(tenant: string, id: string): Promise<boolean>
  /**
   * The tenant's entries in insertion order, a page at a time, optionally only one session's
   * or those matching a metadata filter. A cursor this store did not issue is `INVALID_REQUEST`.
   * Entries added while paging appear on later pages; none is repeated or skipped.
   */
  list(tenant: string, q: MemoryListQuery): Promise<MemoryPage>
  /**
   * Whether writes currently succeed, for readiness checks: false after a write failed
   * (disk full, I/O error — `add` and `deleteSession` then throw `STORE_UNAVAILABLE`), true
   * again after the next write succeeds. Searches work either way. Cheap and synchronous.
   */
  /** Entries acknowledged but not yet in the vector index (searched exactly meanwhile); absent when the store has no such lag. */
  indexBacklog?(): number
  healthy(): boolean
  close(): Promise<void>
}

/** Turns texts into vectors. Implementations are deterministic for a given `id`. */
export interface Embedder {
  /** Names the embedding space (model and settings): a different id means incompatible vectors. */
  readonly id: string
  readonly dimensions: number
  /**
   * Slow enough (tens of milliseconds a text) that a store should acknowledge entries before
   * their vectors exist and embed them in the background; searches find them by their words
   * meanwhile. Absent or false: embedded before the commit, found by vector at once.
   */
  readonly background?: boolean
  /** One unit-length vector per text, in order. */
  embed(texts: readonly string[]): Promise<number[][]>
}
