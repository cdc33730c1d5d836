import { createHash } from 'node:crypto'
import { rmSync } from 'node:fs'
import type { Logger } from '../core/logger.js'
import { DamagedIndexError } from './index-file.js'
import { TenantIndex, moveAside, type HnswParams, type IndexFileRecord } from './hnsw-index.js'
import type { WriteHealth } from '../core/write-health.js'
import { fromBytes, type MemoryDb } from './memory-db.js'
import { cosine, type Ranked } from './memory-ranking.js'

export interface TenantIndexCacheOptions {
  /** `<dataDir>/memory/hnsw` */
  dir: string
  dim: number
  params: HnswParams
  /** Save a tenant's index after this many changes (and at close). */
  saveEvery: number
  logger: Logger
}

/** Labels inserted between two turns of the event loop (HNSW inserts are CPU-bound). */
const SLICE = 100

/**
 * The tenants' HNSW indexes, kept behind LMDB (the truth) without ever failing a caller:
 *
 * - Labels below an index's `covered` are in it (or deleted); labels at or above it are
 *   inserted in the background, in label order, one tenant at a time, and until then
 *   {@link nearest} finds them by an exact scan of that tail. So search results are
 *   complete whatever state the index is in.
 * - A missing or damaged file, or an insert or search that throws, gives the tenant a fresh
 *   index that is filled from LMDB the same way (a rebuild), with one warning in the log;
 *   the fresh file is saved once it is complete.
 * - Saving a file never fails an operation either: a failed save is logged and tried again
 *   after `saveEvery` more changes. Each save is recorded in LMDB (file name and sha256),
 *   and a file that does not match the record is not loaded.
 */
export class TenantIndexCache {
  private readonly draining = new Map<string, Promise<void>>()
  /** Tenants whose index is being built from scratch. */
  private readonly rebuilding = new Set<string>()
  private readonly saving = new Map<string, Promise<void>>()
  private readonly saveScheduled = new Set<string>()
  /** After a failed save: the change count at which to try again. */
  private readonly saveAt = new Map<string, number>()
  private closing = false

  constructor(readonly indexes: Map<string, TenantIndex>, private readonly db: MemoryDb, private readonly writes: WriteHealth, private readonly opts: TenantIndexCacheOptions) {}

  /**
   * The tenant's index: in memory, else its saved file (checked before hnswlib reads it)
   * with the deletions recorded since, else — missing or damaged — a fresh index being
   * filled from LMDB. Labels the index does not cover yet are added in the background.
   */
  get(tenant: string): TenantIndex {
    const have = this.indexes.get(tenant)
    if (have) return have
    const key = tenantKey(tenant)
    const next = this.next(tenant)
    let index: TenantIndex | null = null
    let damaged = false
    try {
      index = TenantIndex.load(this.opts.dir, key, this.opts.dim, { labelsBelow: next, record: this.record(key), params: this.opts.params })
    } catch (err) {
      damaged = true
      const file = err instanceof DamagedIndexError ? err.file : undefined
      const aside = file ? moveAside(this.opts.dir, key, file) : null
      this.opts.logger.warn({ err, tenant_key: key, file, moved_to: aside }, 'memory index file is damaged: rebuilding the index from LMDB')
    }
    if (index) {
      for (const t of this.db.tombstones.getKeys({ start: [tenant, 0], end: [tenant, Infinity] })) {
        if ((t[1] as number) < index.covered) index.remove(t[1] as number)
      }
    } else {
      index = TenantIndex.create(this.opts.dim, this.opts.params)
      if (next > 0) {
        this.rebuilding.add(tenant)
        if (!damaged) this.opts.logger.info({ tenant_key: key, labels: next }, 'no saved memory index: building it from LMDB')
      }
    }
    this.indexes.set(tenant, index)
    if (index.covered < next) void this.catchUp(tenant)
    return index
  }

  /**
   * Brings the tenants' indexes up to what LMDB holds. Resolves once they cover it — or at
   * once for a tenant being rebuilt (that can take a while; searches scan what it lacks).
   * Never rejects.
   */
  async indexed(tenants: Iterable<string>): Promise<void> {
    for (const tenant of tenants) {
      const done = this.catchUp(tenant)
      if (!this.rebuilding.has(tenant)) await done
    }
  }

  /** Nearest labels by cosine among all of the tenant's vectors: the index, plus an exact scan of what it does not cover yet. */
  nearest(tenant: string, vector: readonly number[], k: number): Ranked[] {
    let index = this.get(tenant)
    let found: Ranked[] = []
    try {
      found = index.search(vector, k)
    } catch (err) {
      index = this.replace(tenant, err, 'searching a memory index failed: rebuilding it from LMDB')
    }
    for (const { key, value } of this.db.vectors.getRange({ start: [tenant, index.covered], end: [tenant, Infinity] })) {
      if (value.byteLength === this.opts.dim * 4) found.push({ label: key[1] as number, score: cosine(vector, fromBytes(value)) })
    }
    return found.sort((a, b) => b.score - a.score || a.label - b.label).slice(0, k)
  }

  /** Labels just deleted in LMDB leave the in-memory index too (their tombstones cover the saved file). */
  removed(tenant: string, labels: readonly number[]): void {
    const index = this.indexes.get(tenant)
    if (index) for (const l of labels) index.remove(l)
  }

  /** Throws the tenant's index away and builds it again from LMDB, synchronously (for measurements). */
  rebuildNow(tenant: string): TenantIndex {
    const index = TenantIndex.create(this.opts.dim, this.opts.params)
    for (const { key, value } of this.db.vectors.getRange({ start: [tenant, 0], end: [tenant, Infinity] })) {
      if (value.byteLength === this.opts.dim * 4) index.add(key[1] as number, fromBytes(value))
    }
    index.covered = Math.max(index.covered, this.next(tenant))
    this.rebuilding.delete(tenant)
    this.indexes.set(tenant, index)
    return index
  }

  /** Saves every index with unsaved changes; failures are logged. */
  async saveAll(): Promise<void> {
    for (const tenant of [...this.indexes.keys()]) if ((this.indexes.get(tenant)?.dirty ?? 0) > 0) await this.save(tenant)
  }

  /** Stops the background work, then saves what changed. */
  async close(): Promise<void> {
    this.closing = true
    await Promise.all([...this.draining.values(), ...this.saving.values()])
    for (const tenant of [...this.indexes.keys()]) {
      if ((this.indexes.get(tenant)?.dirty ?? 0) > 0) await this.writeFile(tenant).catch((err: unknown) => this.saveFailed(tenant, err))
    }
  }

  private catchUp(tenant: string): Promise<void> {
    const running = this.draining.get(tenant)
    if (running) return running
    // Started a microtask later, so the entry is in the map before drain() can remove it.
    const done = Promise.resolve().then(() => this.drain(tenant))
    this.draining.set(tenant, done)
    return done
  }

  /** Inserts the labels from `covered` up to LMDB's next label, a slice per event-loop turn. Never rejects. */
  private async drain(tenant: string): Promise<void> {
    try {
      for (;;) {
        const index = this.indexes.get(tenant)
        const next = this.next(tenant)
        if (this.closing || !index || index.covered >= next) break
        // Read and inserted in one synchronous step: a deletion committed meanwhile is either
        // absent from the slice or removed from the index after it.
        const slice = [...this.db.vectors.getRange({ start: [tenant, index.covered], end: [tenant, next], limit: SLICE })]
        const upTo = slice.length < SLICE ? next : (slice.at(-1)!.key[1] as number) + 1
        const outcome = this.insert(tenant, index, slice)
        if (outcome === 'stop') break
        if (outcome === 'ok') index.covered = Math.max(index.covered, upTo)
        await new Promise<void>((r) => setImmediate(r))
      }
      this.caughtUp(tenant)
    } catch (err) {
      this.opts.logger.error({ err, tenant_key: tenantKey(tenant) }, 'indexing memory entries failed; searches scan what the index lacks')
    } finally {
      this.draining.delete(tenant)
    }
  }

  private insert(tenant: string, index: TenantIndex, slice: ReadonlyArray<{ key: [string, number]; value: Buffer }>): 'ok' | 'retry' | 'stop' {
    for (const { key, value } of slice) {
      const label = key[1]
      if (value.byteLength !== this.opts.dim * 4) {
        this.opts.logger.warn({ tenant_key: tenantKey(tenant), label, bytes: value.byteLength }, 'a stored memory vector has the wrong length: the entry is found by keywords only')
        continue
      }
      try {
        index.add(label, fromBytes(value))
      } catch (err) {
        if (this.rebuilding.has(tenant)) {
          // A fresh index fails too: stop here; the next add resumes, searches scan the rest.
          this.opts.logger.error({ err, tenant_key: tenantKey(tenant), label }, 'rebuilding a memory index failed; searches scan what it lacks')
          return 'stop'
        }
        this.replace(tenant, err, 'inserting into a memory index failed: rebuilding it from LMDB', label)
        return 'retry'
      }
    }
    return 'ok'
  }

  /** An index whose native calls threw is not trusted again: a fresh one takes its place and is filled from LMDB. */
  private replace(tenant: string, err: unknown, msg: string, label?: number): TenantIndex {
    this.opts.logger.warn({ err, tenant_key: tenantKey(tenant), ...(label === undefined ? {} : { label }) }, msg)
    const fresh = TenantIndex.create(this.opts.dim, this.opts.params)
    this.indexes.set(tenant, fresh)
    this.rebuilding.add(tenant)
    void this.catchUp(tenant)
    return fresh
  }

  private caughtUp(tenant: string): void {
    const index = this.indexes.get(tenant)
    if (!index || this.closing || index.covered < this.next(tenant)) return
    if (this.rebuilding.delete(tenant)) {
      this.opts.logger.info({ tenant_key: tenantKey(tenant), labels: index.covered }, 'memory index rebuilt from LMDB')
      this.scheduleSave(tenant)
    } else if (index.dirty >= (this.saveAt.get(tenant) ?? this.opts.saveEvery)) {
      this.scheduleSave(tenant)
    }
  }

  /**
   * On a later turn of the event loop: by then every deletion whose commit has resolved has
   * also been applied to the index, so the tombstones the save clears are all in the file.
   */
  private scheduleSave(tenant: string): void {
    if (this.saveScheduled.has(tenant)) return
    this.saveScheduled.add(tenant)
    setImmediate(() => {
      this.saveScheduled.delete(tenant)
      if (!this.closing) void this.save(tenant)
    })
  }

  /** One save per tenant at a time; never rejects. */
  private save(tenant: string): Promise<void> {
    const running = this.saving.get(tenant)
    if (running) return running
    const done = this.writeFile(tenant)
      .catch((err: unknown) => this.saveFailed(tenant, err))
      .finally(() => this.saving.delete(tenant))
    this.saving.set(tenant, done)
    return done
  }

  /**
   * Writes and checks the file, records it (with the tombstones it makes obsolete cleared)
   * in one LMDB transaction, then renames it into place. A failure at any step leaves the
   * previous file and its record as they were.
   */
  private async writeFile(tenant: string): Promise<void> {
    const index = this.indexes.get(tenant)
    if (!index) return
    const key = tenantKey(tenant)
    const tombstones = [...this.db.tombstones.getKeys({ start: [tenant, 0], end: [tenant, Infinity] })]
    const changes = index.dirty
    const prepared = index.write(this.opts.dir, key)
    try {
      await this.writes.run(() => this.db.meta.transaction(() => {
        this.db.meta.put(recordKey(key), { file: prepared.file, sha256: prepared.sha256 } satisfies IndexFileRecord)
        for (const t of tombstones) this.db.tombstones.remove(t)
      }), 'the memory index record')
      TenantIndex.install(this.opts.dir, key, prepared)
    } catch (err) {
      rmSync(prepared.tmp, { force: true })
      throw err
    }
    index.dirty = Math.max(0, index.dirty - changes)
    this.saveAt.delete(tenant)
  }

  private saveFailed(tenant: string, err: unknown): void {
    const index = this.indexes.get(tenant)
    if (index) this.saveAt.set(tenant, index.dirty + this.opts.saveEvery)
    this.opts.logger.warn({ err, tenant_key: tenantKey(tenant) }, 'saving a memory index failed; it is saved again later (LMDB has every entry)')
  }

  private record(key: string): IndexFileRecord | undefined {
    return this.db.meta.get(recordKey(key)) as IndexFileRecord | undefined
  }

  private next(tenant: string): number {
    return this.db.stats.get(tenant)?.next ?? 0
  }
}

/** The tenant's name in file names and logs: a tenant may be any string, and is not for logs. */
export function tenantKey(tenant: string): string {
  return createHash('sha256').update(tenant).digest('hex').slice(0, 24)
}

/** meta key of a tenant's index file record; every one starts with this prefix. */
export const RECORD_PREFIX = 'hnsw_file:'
const recordKey = (key: string) => `${RECORD_PREFIX}${key}`
