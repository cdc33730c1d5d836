import { matchesMetadata, type MemoryEntry, type MemoryListQuery, type MemoryPage } from '../core/memory-store.js'
import { decodeMemoryCursor, memoryPage } from './memory-cursor.js'
import { publicEntry, type MemoryDb, type StoredEntry } from './memory-db.js'

/** A page of a tenant's entries in the order they were added, optionally one session's, filtered by metadata. */
export function listEntries(db: MemoryDb, tenant: string, q: MemoryListQuery): MemoryPage {
  const after = decodeMemoryCursor(q.cursor)
  const out: { label: number; entry: MemoryEntry }[] = []
  const keep = (label: number, e: StoredEntry | undefined) => {
    if (e && matchesMetadata(e.metadata, q.metadata)) out.push({ label, entry: publicEntry(e) })
  }
  if (q.sessionId) {
    for (const key of db.bySession.getKeys({ start: [tenant, q.sessionId, after + 1], end: [tenant, q.sessionId, Infinity] })) {
      if (out.length > q.limit) break
      keep(key[2] as number, db.entries.get([tenant, key[2] as number]))
    }
  } else {
    for (const { key, value } of db.entries.getRange({ start: [tenant, after + 1], end: [tenant, Infinity] })) {
      if (out.length > q.limit) break
      keep(key[1], value)
    }
  }
  return memoryPage(out, q.limit)
}
