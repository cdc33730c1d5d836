import type { MemoryDb, TenantStats } from './memory-db.js'
import { withoutLabels } from './posting-blocks.js'
import { tokenize } from './text-features.js'

// What deleting memory entries writes, inside the caller's write transaction.

/**
 * Removes one entry inside a write transaction: its id and session row (the caller drops its postings),
 * counted out of `stats` (the caller stores them); the label is tombstoned for the saved index.
 */
export function removeLabel(db: MemoryDb, tenant: string, label: number, stats: TenantStats): Set<string> | undefined {
  const e = db.entries.get([tenant, label])
  let terms: Set<string> | undefined
  if (e) {
    terms = new Set(tokenize(e.content))
    db.ids.remove(e.id)
    if (e.session_id) db.bySession.remove([tenant, e.session_id, label])
    stats.docs--
    stats.totalLength -= e.len
  }
  db.entries.remove([tenant, label])
  db.tombstones.put([tenant, label], 1)
  return terms
}

/**
 * Inside a write transaction: rewrites the posting blocks holding these labels without them
 * (or removes a block left empty), so a deleted entry's words leave the disk with it.
 */
export function dropPostings(db: MemoryDb, tenant: string, labels: readonly number[]): void {
  const byBlock = new Map<number, Set<number>>()
  for (const label of labels) {
    // The block holding a label is the last one that starts at or before it.
    for (const key of db.blocks.getKeys({
      start: [tenant, label],
      end: [tenant] as unknown as [string, number],
      reverse: true,
      limit: 1,
    })) {
      const first = key[1] as number
      let set = byBlock.get(first)
      if (!set) byBlock.set(first, (set = new Set()))
      set.add(label)
    }
  }
  for (const [first, drop] of byBlock) {
    const block = db.blocks.get([tenant, first])
    if (!block) continue
    const rest = withoutLabels(first, block, drop)
    if (rest) db.blocks.put([tenant, first], rest)
    else db.blocks.remove([tenant, first])
  }
}
