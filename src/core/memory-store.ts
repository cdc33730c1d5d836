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

export interface MemoryHit { entry: MemoryEntry; score: number }

export interface MemoryQuery {
  tenant: string
  text: string
  limit: number
  /** Only this session's entries. */
  sessionId?: string | undefined
  /** Ranking: both signals fused (default), or one alone (for evaluation). */
  mode?: 'hybrid' | 'vector' | 'keyword'
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
  add(entries: readonly NewMemoryEntry[]): Promise<MemoryEntry[]>
  search(q: MemoryQuery): Promise<MemoryHit[]>
  /**
   * Removes a session's entries; returns how many. Session ids are never reused, so the
   * session stays deleted: a later `add` of entries for it is `SESSION_NOT_FOUND`.
   */
  deleteSession(tenant: string, sessionId: string): Promise<number>
  count(tenant: string): Promise<number>
  /**
   * Whether writes currently succeed, for readiness checks: false after a write failed
   * (disk full, I/O error — `add` and `deleteSession` then throw `STORE_UNAVAILABLE`), true
   * again after the next write succeeds. Searches work either way. Cheap and synchronous.
   */
  healthy(): boolean
  close(): Promise<void>
}

/** Turns texts into vectors. Implementations are deterministic for a given `id`. */
export interface Embedder {
  /** Names the embedding space (model and settings): a different id means incompatible vectors. */
  readonly id: string
  readonly dimensions: number
  /** One unit-length vector per text, in order. */
  embed(texts: readonly string[]): Promise<number[][]>
}
