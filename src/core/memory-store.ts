/** One remembered passage, with provenance. */
export interface MemoryEntry {
  id: string
  tenant: string
  content: string
  session_id: string | null
  turn: number | null
  seq: number | null
  created_at: string
  metadata?: Record<string, string>
}

export interface MemoryHit { entry: MemoryEntry; score: number }

export interface MemoryQuery { tenant: string; text: string; limit: number; sessionId?: string }

/** Semantic memory, strictly tenant-scoped: a query never returns another tenant's entries. */
export interface MemoryStore {
  add(entries: Omit<MemoryEntry, 'id' | 'created_at'>[]): Promise<MemoryEntry[]>
  search(q: MemoryQuery): Promise<MemoryHit[]>
  deleteSession(tenant: string, sessionId: string): Promise<number>
  close(): Promise<void>
}
