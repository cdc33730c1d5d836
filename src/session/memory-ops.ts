import { invalidRequest } from '../core/errors.js'
import type { MemoryStore } from '../core/memory-store.js'
import type { MemoryAdd, MemoryAdded, MemorySearchQuery, MemorySearchResult } from '../core/wire.js'

/** Any session id a memory request names must be one of the caller's (else SESSION_NOT_FOUND). */
type Owned = (sessionId: string) => unknown

/** `GET /v1/memory/search`: scoped to the caller's tenant, or to one of its sessions. */
export async function searchMemory(store: MemoryStore, tenant: string, q: MemorySearchQuery, owned: Owned): Promise<MemorySearchResult> {
  const scope = q.scope ?? 'tenant'
  if (scope === 'session' && !q.session_id) throw invalidRequest('query/session_id', "is required with scope 'session'")
  if (q.session_id) await owned(q.session_id)
  const hits = await store.search({ tenant, text: q.q, limit: q.limit ?? 5, ...(q.session_id ? { sessionId: q.session_id } : {}) })
  return { results: hits.map((h) => ({ content: h.entry.content, score: h.score, session_id: h.entry.session_id, turn: h.entry.turn, seq: h.entry.seq })) }
}

/** `POST /v1/memory`: documents or facts added directly, optionally tied to one of the caller's sessions. */
export async function addMemory(store: MemoryStore, tenant: string, entries: MemoryAdd, owned: Owned): Promise<MemoryAdded> {
  for (const sid of new Set(entries.flatMap((e) => (e.session_id ? [e.session_id] : [])))) await owned(sid)
  const added = await store.add(entries.map((e) => ({
    tenant, content: e.content, session_id: e.session_id ?? null, turn: null, seq: null, ...(e.metadata ? { metadata: e.metadata } : {}),
  })))
  return { ids: added.map((a) => a.id) }
}
