import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { open, type Database, type RootDatabase } from 'lmdb'
import { storeUnavailable } from '../core/errors.js'
import type { MemoryEntry } from '../core/memory-store.js'

/** An entry as stored: the public entry plus its length in tokens (for BM25). */
export type StoredEntry = MemoryEntry & { len: number }
export interface TenantStats { docs: number; totalLength: number; next: number }

/** The memory store's LMDB environment (`<dataDir>/memory/lmdb`): the truth the HNSW index is a cache of. */
export interface MemoryDb {
  root: RootDatabase
  meta: Database<unknown, string>
  /** [tenant, label] → entry */
  entries: Database<StoredEntry, [string, number]>
  /** [tenant, label] → vector (float32 bytes) */
  vectors: Database<Buffer, [string, number]>
  /** entry id → [tenant, label] */
  ids: Database<[string, number], string>
  /** [tenant, session, label] → 1 */
  bySession: Database<number, [string, string, number]>
  /** [tenant, term, label] → term frequency */
  postings: Database<number, [string, string, number]>
  /** tenant → stats */
  stats: Database<TenantStats, string>
  /** [tenant, label] → 1: deleted since the tenant's index file was last saved */
  tombstones: Database<number, [string, number]>
  /** [tenant, session] → deletion time (ms): sessions whose memories were deleted; nothing is added to them again */
  deletedSessions: Database<number, [string, string]>
}

/** How long a failed store waits between the probe writes a health check may start. */
const PROBE_INTERVAL_MS = 1000

/**
 * The memory store's writes, each observed: one that fails (disk full, I/O error) becomes
 * `STORE_UNAVAILABLE` — never a hang, never an unhandled rejection — and the store counts
 * as unhealthy until a write succeeds again.
 */
export class MemoryWrites {
  private failed = false
  private probing = false
  private lastProbe = 0
  private closed = false

  constructor(private readonly db: MemoryDb) {}

  /**
   * Runs one LMDB write and resolves once it is committed, and with fsync durability once it
   * is on disk: lmdb-js settles a write's promise only after `mdb_txn_commit` returned, and
   * with its overlapping sync that commit returns after the fsync (lmdb-js write.js and
   * mdb.c). `root.flushed` is deliberately not awaited: lmdb-js drops its resolvers when a
   * commit fails, so it would never settle. `what` names the data in the error.
   */
  async run<T>(write: () => Promise<T>, what: string): Promise<T> {
    let result: T
    try {
      result = await write()
    } catch (err) {
      this.failed = true
      throw storeUnavailable(err, what)
    }
    this.failed = false
    return result
  }

  /**
   * False after a write failed, true again after the next one succeeds. While false, a
   * check starts a small probe write now and then, so the store reports itself healthy
   * once space is back even when nothing else writes (a load balancer that stops sending
   * traffic to an unready instance would otherwise keep it unready for ever).
   */
  healthy(): boolean {
    if (this.failed && !this.closed && !this.probing && Date.now() - this.lastProbe >= PROBE_INTERVAL_MS) {
      this.probing = true
      this.lastProbe = Date.now()
      this.run(() => this.db.meta.put('write_probe', this.lastProbe), 'a write probe')
        .catch(() => undefined) // the failure is the state this reports; run() observed the details
        .finally(() => { this.probing = false })
    }
    return !this.failed
  }

  /** No more probes (the environment is closing). */
  close(): void {
    this.closed = true
  }
}

export function openMemoryDb(dataDir: string, durability: 'fsync' | 'relaxed' = 'fsync'): MemoryDb {
  const dir = join(dataDir, 'memory')
  mkdirSync(dir, { recursive: true })
  const root = open({ path: join(dir, 'lmdb'), maxDbs: 12, noMemInit: true, ...(durability === 'relaxed' ? { noSync: true } : {}) })
  return {
    root,
    meta: root.openDB({ name: 'meta' }),
    entries: root.openDB({ name: 'entries' }),
    vectors: root.openDB({ name: 'vectors', encoding: 'binary' }),
    ids: root.openDB({ name: 'ids' }),
    bySession: root.openDB({ name: 'by_session' }),
    postings: root.openDB({ name: 'postings' }),
    stats: root.openDB({ name: 'stats' }),
    tombstones: root.openDB({ name: 'tombstones' }),
    deletedSessions: root.openDB({ name: 'deleted_sessions' }),
  }
}

export function toBytes(v: readonly number[]): Buffer {
  const f = Float32Array.from(v)
  return Buffer.from(f.buffer, f.byteOffset, f.byteLength)
}

export function fromBytes(b: Uint8Array): number[] {
  const f = new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4)
  return Array.from(f)
}
