import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { open, type Database, type DatabaseOptions, type RootDatabase } from 'lmdb'
import type { MemoryEntry } from '../core/memory-store.js'
import type { IdempotencyRecord } from '../core/stores.js'

/** An entry as stored: the public entry plus its length in tokens (for BM25). */
export type StoredEntry = MemoryEntry & { len: number }
/** The entry as clients see it (without its token count). */
export function publicEntry(e: StoredEntry): MemoryEntry {
  const { len: _len, ...rest } = e
  return rest
}

export interface TenantStats {
  docs: number
  totalLength: number
  next: number
}

/**
 * The layout this build writes. 1: a row per (tenant, term, entry) posting and a float32 copy of
 * every vector; 2: posting blocks, and no vectors — they are derived from the content by the
 * embedder, kept in the HNSW index file and, until a file covers them, in process memory;
 * 3: as 2, with entries encoded against shared msgpack structures ({@link ENTRY_STRUCTURES}).
 */
export const MEMORY_LAYOUT = 3

/**
 * Where the entries database keeps its shared msgpack structures (msgpackr "records", stored by
 * lmdb-js under this key of the same database, outside every [tenant, label] range). An entry then
 * holds its values only, not its field names again: about half the bytes, and read by a decoder
 * compiled once per shape instead of a structure defined anew in every record (layout 2, lmdb-js's
 * default without shared structures), which cost about 2 µs per entry read.
 */
export const ENTRY_STRUCTURES = Symbol.for('structures')

/**
 * The fields of a stored entry. Only objects whose keys are all among them (entries, in the key
 * orders the surfaces build) take one of the 32 shared structures; a metadata object's keys are
 * the user's, and an object of them is encoded with its own field names, as in layout 2 — so
 * metadata of many shapes cannot use up the shared structures.
 */
const ENTRY_FIELDS: ReadonlySet<string> = new Set(
  // A record of every StoredEntry key: a field added to the type fails to compile until it is listed here.
  Object.keys({
    id: true,
    tenant: true,
    content: true,
    session_id: true,
    turn: true,
    seq: true,
    created_at: true,
    metadata: true,
    len: true,
  } satisfies Record<keyof StoredEntry, true>),
)

/** The entries database's options (lmdb-js hands `shouldShareStructure` to msgpackr; its typings do not list it). */
const ENTRY_OPTIONS: DatabaseOptions & { name: string; shouldShareStructure(keys: string[]): boolean } = {
  name: 'entries',
  sharedStructuresKey: ENTRY_STRUCTURES,
  shouldShareStructure: (keys) => keys.every((k) => ENTRY_FIELDS.has(k)),
}

/** The memory store's LMDB environment (`<dataDir>/memory/lmdb`): the truth (entries and their postings) the HNSW index is a cache of. */
export interface MemoryDb {
  root: RootDatabase
  meta: Database<unknown, string>
  /** [tenant, label] → entry */
  entries: Database<StoredEntry, [string, number]>
  /** entry id → [tenant, label] */
  ids: Database<[string, number], string>
  /** [tenant, session, label] → 1 */
  bySession: Database<number, [string, string, number]>
  /** [tenant, first label] → the keyword postings of the entries one add() call committed (see posting-blocks.ts) */
  blocks: Database<Buffer, [string, number]>
  /** tenant → stats */
  stats: Database<TenantStats, string>
  /** [tenant, label] → 1: deleted since the tenant's index file was last saved */
  tombstones: Database<number, [string, number]>
  /** [tenant, session] → deletion time (ms): sessions whose memories were deleted; nothing is added to them again */
  deletedSessions: Database<number, [string, string]>
  /** [tenant, scope, caller's key] → the outcome of an idempotent add, written with its entries (memory-outcomes.ts) */
  idempotency: Database<IdempotencyRecord, [string, string, string]>
}

/**
 * The probe a WriteHealth of the memory environment runs (see core/write-health.ts): about 1 MiB in
 * 1 KB values, written then removed, so "writable" means real room, not one reused free page.
 * Memory's writes wait for each write's own promise, which lmdb-js settles only after the commit (and,
 * with its overlapping sync, the fsync); `root.flushed` is never awaited: lmdb-js drops its resolvers
 * when a commit fails, so it would never settle.
 */
export function memoryProbe(db: MemoryDb): () => Promise<void> {
  const value = 'p'.repeat(1000)
  return async () => {
    await db.meta.transaction(() => {
      for (let i = 0; i < 1024; i++) void db.meta.put(`write_probe_${i}`, value)
    })
    await db.meta.transaction(() => {
      for (let i = 0; i < 1024; i++) void db.meta.remove(`write_probe_${i}`)
    })
  }
}

export function openMemoryDb(dataDir: string, durability: 'fsync' | 'relaxed' = 'fsync'): MemoryDb {
  const dir = join(dataDir, 'memory')
  mkdirSync(dir, { recursive: true })
  const root = open({ path: join(dir, 'lmdb'), maxDbs: 12, noMemInit: true, ...(durability === 'relaxed' ? { noSync: true } : {}) })
  return {
    root,
    meta: root.openDB({ name: 'meta' }),
    entries: root.openDB(ENTRY_OPTIONS),
    ids: root.openDB({ name: 'ids' }),
    bySession: root.openDB({ name: 'by_session' }),
    blocks: root.openDB({ name: 'posting_blocks', encoding: 'binary' }),
    stats: root.openDB({ name: 'stats' }),
    tombstones: root.openDB({ name: 'tombstones' }),
    deletedSessions: root.openDB({ name: 'deleted_sessions' }),
    // JSON (as the session store's): msgpack would turn a lone surrogate in an outcome into U+FFFD.
    idempotency: root.openDB({ name: 'idempotency', encoding: 'json' }),
  }
}
