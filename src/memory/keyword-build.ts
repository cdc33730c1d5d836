import { KeywordIndex } from './keyword-index.js'
import type { MemoryDb } from './memory-db.js'
import { decodeBlock } from './posting-blocks.js'

/**
 * The tenant's keyword index built from its posting blocks in LMDB, read in one synchronous
 * pass (one snapshot). A block may still list entries deleted since (a deletion rewrites the
 * block in its own transaction, but a layout-1 upgrade or a damaged block need not): only
 * labels whose entry exists count.
 */
export function buildKeywordIndex(db: MemoryDb, tenant: string): KeywordIndex {
  const ix = new KeywordIndex()
  const next = db.stats.get(tenant)?.next ?? 0
  const live = new Uint8Array(next)
  for (const key of db.entries.getKeys({ start: [tenant, 0], end: [tenant, next] })) live[key[1] as number] = 1
  for (const { key, value } of db.blocks.getRange({ start: [tenant, 0], end: [tenant, next] })) {
    decodeBlock(key[1] as number, value, (label, tf) => {
      if (label >= next || live[label] !== 1 || label < ix.covered) return
      ix.skip(label)
      ix.add(label, tf)
    })
  }
  ix.skip(next)
  return ix
}
