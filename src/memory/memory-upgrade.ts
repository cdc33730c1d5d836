import { mkdirSync, renameSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Logger } from '../core/logger.js'
import { MEMORY_LAYOUT, openMemoryDb, type MemoryDb } from './memory-db.js'
import { termFrequencies } from './bm25.js'
import { encodeBlock, type BlockDoc } from './posting-blocks.js'
import { tokenize } from './text-features.js'

/** Entries per transaction (and per posting block, from layout 1) written by the upgrade. */
const BLOCK = 1000

export class MemoryLayoutError extends Error {}

/**
 * Opens the memory environment, upgrading an older layout first (once; logged):
 * - layout 1: each tenant's postings are written again as blocks (from the entries' content,
 *   which is what the rows were made from), and the posting rows and the float32 vector copies
 *   are dropped (the saved index files stay valid: labels do not change; what they do not cover
 *   is embedded again in the background);
 * - layouts 1 and 2: every entry is written again against the shared msgpack structures
 *   (memory-db.ts, ENTRY_STRUCTURES) — the decoder of this build reads both encodings, so a
 *   directory half rewritten is whole;
 * then the file is compacted so the space comes back. A crash at any point leaves a directory
 * that opens and is upgraded again: the layout mark is written with the last change, and the
 * compacted copy replaces the file only when it is whole.
 */
export async function openUpgraded(dataDir: string, durability: 'fsync' | 'relaxed', logger: Logger): Promise<MemoryDb> {
  const lmdbDir = join(dataDir, 'memory', 'lmdb')
  const compactDir = join(dataDir, 'memory', 'lmdb-compact')
  rmSync(compactDir, { recursive: true, force: true }) // a compaction that died with its process
  const db = openMemoryDb(dataDir, durability)
  const layout = db.meta.get('layout') as number | undefined
  if (layout === MEMORY_LAYOUT) return db
  if (layout !== undefined && layout !== 2) {
    await db.root.close()
    throw new MemoryLayoutError(
      `The memory store in ${lmdbDir} has layout ${String(layout)}; this build reads layout ${MEMORY_LAYOUT} and upgrades layouts 1 and 2.`,
    )
  }
  const names = new Set(db.root.getKeys() as Iterable<unknown>)
  const from = layout ?? 1
  if (from === 1 && !names.has('postings') && !names.has('vectors')) {
    await db.meta.put('layout', MEMORY_LAYOUT) // a new directory
    return db
  }
  const t0 = performance.now()
  const entries = await rewriteEntries(db, from === 1)
  const dropped = from === 1 ? [db.root.openDB({ name: 'postings' }), db.root.openDB({ name: 'vectors', encoding: 'binary' })] : []
  await db.root.transaction(() => {
    for (const d of dropped) void d.drop()
    void db.meta.put('layout', MEMORY_LAYOUT)
  })
  await db.root.flushed
  // The dropped rows' and rewritten entries' pages are free inside the file; a compacting copy gives them back to the disk.
  mkdirSync(compactDir)
  await db.root.backup(compactDir, true)
  await db.root.close()
  renameSync(join(compactDir, 'data.mdb'), join(lmdbDir, 'data.mdb'))
  rmSync(compactDir, { recursive: true, force: true })
  const upgraded = openMemoryDb(dataDir, durability)
  logger.info({ from, to: MEMORY_LAYOUT, entries, ms: Math.round(performance.now() - t0) }, 'upgraded the memory store layout')
  return upgraded
}

/**
 * One pass over every tenant's entries, BLOCK at a time, each page in one transaction: the entries
 * written again as they read (now against the shared structures) and, from layout 1, their posting
 * blocks (made from the content, which is what the rows were made from). Returns how many entries.
 */
async function rewriteEntries(db: MemoryDb, withBlocks: boolean): Promise<number> {
  let count = 0
  for (const tenant of [...db.stats.getKeys()] as string[]) {
    // Blocks a previous, interrupted upgrade wrote are written again.
    if (withBlocks)
      await db.blocks.transaction(() => {
        for (const key of db.blocks.getKeys({ start: [tenant, 0], end: [tenant, Infinity] })) void db.blocks.remove(key)
      })
    for (let from = 0; ;) {
      const rows = [...db.entries.getRange({ start: [tenant, from], end: [tenant, Infinity], limit: BLOCK })]
      if (rows.length === 0) break
      const first = rows[0]!.key[1] as number
      const docs: BlockDoc[] = withBlocks
        ? rows.map(({ key, value }) => ({ label: key[1] as number, tf: termFrequencies(tokenize(value.content)) }))
        : []
      await db.entries.transaction(() => {
        for (const { key, value } of rows) void db.entries.put(key, value)
        if (withBlocks) void db.blocks.put([tenant, first], encodeBlock(first, docs))
      })
      count += rows.length
      from = (rows.at(-1)!.key[1] as number) + 1
    }
  }
  return count
}
