import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { MemoryLog, TenantChanges } from '../core/memory-log.js'
import { termFrequencies } from './bm25.js'
import type { MemoryCore } from './memory-core.js'
import { MEMORY_LAYOUT, openMemoryDb, type MemoryDb } from './memory-db.js'
import { dropPostings, removeLabel } from './memory-removal.js'
import { tokenize } from './text-features.js'

/** What a replica's local copy records per tenant beside LMDB's `next`: which history it copied, and how many of its deletions. */
export interface CopiedHead {
  incarnation: string
  deletions: number
}

const headKey = (tenant: string) => `replica:${tenant}`

export function copiedHead(db: MemoryDb, tenant: string): CopiedHead & { next: number } {
  const h = db.meta.get(headKey(tenant)) as CopiedHead | undefined
  return { incarnation: h?.incarnation ?? '', deletions: h?.deletions ?? 0, next: db.stats.get(tenant)?.next ?? 0 }
}

/**
 * Opens the replica's local copy (`<dir>/memory/lmdb`, written without fsync: it is a cache),
 * throwing it away first when it is not a prefix of what the database holds now — another
 * history of a tenant (the database recreated or restored), or ahead of it. The copy is then
 * made again from the database as tenants are used.
 */
export async function openLocalCopy(dir: string, log: MemoryLog): Promise<{ db: MemoryDb; discarded: boolean }> {
  let db = openMemoryDb(dir, 'relaxed')
  const tenants = [...db.stats.getKeys()] as string[]
  const heads = tenants.length > 0 ? await log.heads(tenants) : new Map()
  const stale =
    (db.meta.get('layout') !== undefined && db.meta.get('layout') !== MEMORY_LAYOUT) ||
    tenants.some((t) => {
      const mine = copiedHead(db, t)
      const theirs = heads.get(t)
      return !theirs || theirs.incarnation !== mine.incarnation || theirs.next < mine.next || theirs.deletions < mine.deletions
    })
  if (stale) {
    await db.root.close()
    rmSync(join(dir, 'memory'), { recursive: true, force: true })
    db = openMemoryDb(dir, 'relaxed')
  }
  await db.meta.put('layout', MEMORY_LAYOUT)
  return { db, discarded: stale }
}

/**
 * Applies one tenant's changes from the database to the local copy, in one LMDB transaction
 * (deletions of entries it holds, then the new entries with their posting blocks), then to the
 * keyword index and the HNSW cache exactly as a local commit would be. `vectors`: the vectors
 * this replica made for entries it added itself (others are embedded again from their content).
 */
export async function applyChanges(
  core: MemoryCore,
  tenant: string,
  ch: TenantChanges,
  vectors?: ReadonlyMap<number, number[]>,
): Promise<void> {
  const db = core.db
  const before = copiedHead(db, tenant)
  if (ch.removed.length === 0 && ch.next <= before.next && ch.incarnation === before.incarnation) return
  core.cache.open(tenant) // before the commit, as for local adds
  const dropped: Array<{ label: number; terms: Set<string> }> = []
  await core.writes.run(
    () =>
      db.entries.childTransaction(() => {
        dropped.length = 0
        const stats = db.stats.get(tenant) ?? { docs: 0, totalLength: 0, next: 0 }
        const below = ch.removed.filter((l) => l < before.next && db.entries.doesExist([tenant, l]))
        for (const label of below) {
          const terms = removeLabel(db, tenant, label, stats)
          if (terms) dropped.push({ label, terms })
        }
        dropPostings(db, tenant, below)
        for (const a of ch.added) {
          if (a.label < before.next) continue
          db.entries.put([tenant, a.label], { ...a.entry, len: a.len })
          db.ids.put(a.entry.id, [tenant, a.label])
          if (a.entry.session_id) db.bySession.put([tenant, a.entry.session_id, a.label], 1)
          stats.docs++
          stats.totalLength += a.len
        }
        for (const b of ch.blocks) if (b.first >= before.next) db.blocks.put([tenant, b.first], Buffer.from(b.postings))
        stats.next = Math.max(stats.next, ch.next)
        db.stats.put(tenant, stats)
        db.meta.put(headKey(tenant), { incarnation: ch.incarnation, deletions: ch.deletions } satisfies CopiedHead)
      }),
    'the local copy of memory entries',
  )
  core.removed(
    tenant,
    dropped,
    dropped.map((d) => d.label),
  )
  const added = ch.added.filter((a) => a.label >= before.next)
  // Labels the database skipped (entries deleted before this replica saw them) count as covered.
  const ix = core.keywords.get(tenant)
  if (ix) {
    let ok = ix.covered === before.next
    for (const a of added) {
      if (!ok) break
      ix.skip(a.label)
      ok = ix.add(a.label, termFrequencies(tokenize(a.entry.content)))
    }
    if (ok) ix.skip(ch.next)
    else core.keywords.delete(tenant)
  }
  core.cache.added(
    tenant,
    added.flatMap((a) => {
      const vector = vectors?.get(a.label)
      return vector ? [{ label: a.label, vector }] : []
    }),
  )
}
