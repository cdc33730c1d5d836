import type { Logger } from '../core/logger.js'
import { DamagedIndexError } from './index-file.js'
import { TenantIndex, moveAside, type HnswParams, type IndexFileRecord } from './hnsw-index.js'
import type { WriteHealth } from '../core/write-health.js'
import type { Embedder } from '../core/memory-store.js'
import type { MemoryDb } from './memory-db.js'
import { cosine, type Ranked } from './memory-ranking.js'
import { IndexSaves, recordKey, tenantKey } from './index-saves.js'

export { RECORD_PREFIX, tenantKey } from './index-saves.js'

export interface TenantIndexCacheOptions {
  /** `<dataDir>/memory/hnsw` */
  dir: string
  dim: number
  params: HnswParams
  /** Makes the vectors of entries that have none in memory (after a restart, a rebuild, an embedder change). */
  embedder: Embedder
  /**
   * Save a tenant's index once its changes since the last save reach `saveGrowth` × its
   * size, and at least `saveEvery` (and at close): the bytes written stay proportional to
   * the index's size, not to its size × adds.
   */
  saveEvery: number
  saveGrowth: number
  logger: Logger
}

/**
 * Milliseconds of HNSW inserts between two turns of the event loop (inserts are CPU-bound and
 * synchronous): 8, or 24 while more than BIG_BACKLOG entries wait — every search scans the
 * waiting vectors exactly, so a long backlog under search load would otherwise feed itself.
 */
const SLICE_MS = 8
const BIG_SLICE_MS = 24
const BIG_BACKLOG = 4096
/** Entries embedded at a time when their vectors are not in memory. */
const EMBED_BATCH = 128
/** At close, time spent inserting what waits in memory before the last save (a shutdown should not wait on a long backlog). */
const CLOSE_BUDGET_MS = 2_000
/** After indexing failed (an embedder endpoint down…), wait this long before trying again. */
const RETRY_MS = 5_000

/**
 * The tenants' HNSW indexes, kept behind LMDB (the truth) without ever failing a caller.
 * Vectors are derived data: LMDB keeps the entries' content, not their vectors.
 *
 * - Labels below an index's `covered` are in it (or deleted); labels at or above it are
 *   inserted in the background, in label order, a few milliseconds at a time, and until then
 *   their vectors wait in memory (`tail`) and {@link nearest} finds them by an exact scan.
 *   `add()` hands its vectors over after the commit and returns: acknowledging does not wait
 *   for the index.
 * - Entries whose vectors are not in memory — the unsaved part after a restart or crash, a
 *   rebuild, an embedder change — are embedded again from their content, in the background;
 *   until then they are found by keywords only.
 * - A missing or damaged file, or an insert or search that throws, gives the tenant a fresh
 *   index that is filled from LMDB the same way (a rebuild), with one warning in the log;
 *   the fresh file is saved once it is complete.
 * - An index is saved when its changes since the last save reach a share of its size, and at
 *   close. Saving never fails an operation: a failed save is logged and tried again after as
 *   many changes again. Each save is recorded in LMDB (file name and sha256), and a file that
 *   does not match the record is not loaded.
 */
export class TenantIndexCache {
  private readonly draining = new Map<string, Promise<void>>()
  /** Tenants whose index is being built from scratch. */
  private readonly rebuilding = new Set<string>()
  /** Per tenant, vectors of labels at or above its index's `covered`, waiting to be inserted (null: the embedder gave a vector of the wrong length). */
  private readonly tails = new Map<string, Map<number, Float32Array | null>>()
  /** After indexing failed: when to try again. */
  private readonly retryAt = new Map<string, number>()
  private closing = false

  private readonly saves: IndexSaves

  constructor(
    readonly indexes: Map<string, TenantIndex>,
    private readonly db: MemoryDb,
    writes: WriteHealth,
    private readonly opts: TenantIndexCacheOptions,
  ) {
    this.saves = new IndexSaves(indexes, db, writes, opts)
  }

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
   * Committed entries' vectors, handed over after the commit: searchable at once (exact scan),
   * inserted into the index in the background. Returns at once.
   */
  added(tenant: string, vectors: ReadonlyArray<{ label: number; vector: number[] }>): void {
    const index = this.get(tenant)
    const tail = this.tail(tenant)
    for (const { label, vector } of vectors) if (label >= index.covered) tail.set(label, this.checked(vector))
    void this.catchUp(tenant)
  }

  /** Nearest labels by cosine among all of the tenant's vectors: the index (searched at `ef`, default efSearch), plus an exact scan of what it does not cover yet. */
  nearest(tenant: string, vector: readonly number[], k: number, ef?: number): Ranked[] {
    let index = this.get(tenant)
    let found: Ranked[] = []
    try {
      found = index.search(vector, k, undefined, ef)
    } catch (err) {
      index = this.replace(tenant, err, 'searching a memory index failed: rebuilding it from LMDB')
    }
    const tail = this.tails.get(tenant)
    if (tail) {
      for (const [label, v] of tail) {
        if (label < index.covered) tail.delete(label)
        else if (v) found.push({ label, score: cosine(vector, v) })
      }
    }
    if (index.covered < this.next(tenant)) void this.catchUp(tenant)
    return found.sort((a, b) => b.score - a.score || a.label - b.label).slice(0, k)
  }

  /** The label's vector, from the index or the tail; undefined when neither has it (deleted, or not embedded again yet). */
  vectorOf(tenant: string, label: number): ArrayLike<number> | undefined {
    const tail = this.tails.get(tenant)?.get(label)
    if (tail !== undefined) return tail ?? undefined
    const index = this.get(tenant)
    return label < index.covered ? index.point(label) : undefined
  }

  /** Labels just deleted in LMDB leave the in-memory index too (their tombstones cover the saved file). */
  removed(tenant: string, labels: readonly number[]): void {
    const index = this.indexes.get(tenant)
    const tail = this.tails.get(tenant)
    for (const l of labels) {
      index?.remove(l)
      tail?.delete(l)
    }
  }

  /** Throws the tenant's index away and builds it again from the entries in LMDB, re-embedding them (for measurements). */
  async rebuildNow(tenant: string): Promise<TenantIndex> {
    const index = TenantIndex.create(this.opts.dim, this.opts.params)
    const next = this.next(tenant)
    for (let from = 0; from < next;) {
      const batch = [...this.db.entries.getRange({ start: [tenant, from], end: [tenant, next], limit: 1024 })]
      if (batch.length === 0) break
      const vectors = await this.opts.embedder.embed(batch.map((e) => e.value.content))
      batch.forEach((e, i) => index.add(e.key[1] as number, vectors[i]!))
      from = (batch.at(-1)!.key[1] as number) + 1
    }
    index.covered = Math.max(index.covered, next)
    this.rebuilding.delete(tenant)
    this.tails.delete(tenant)
    this.indexes.set(tenant, index)
    return index
  }

  /** Entries LMDB holds that the loaded indexes do not cover yet. */
  backlog(): number {
    let n = 0
    for (const [tenant, index] of this.indexes) n += Math.max(0, this.next(tenant) - index.covered)
    return n
  }

  /** Saves every index with unsaved changes; failures are logged. */
  async saveAll(): Promise<void> {
    for (const tenant of [...this.indexes.keys()]) if ((this.indexes.get(tenant)?.dirty ?? 0) > 0) await this.saves.save(tenant)
  }

  /**
   * Stops the background work, inserts the vectors waiting in memory (no embedding) for up to
   * CLOSE_BUDGET_MS in all, then saves what changed. What is left is embedded again at the next start.
   */
  async close(): Promise<void> {
    this.closing = true
    this.saves.closing = true
    await Promise.all([...this.draining.values(), this.saves.running()])
    const deadline = performance.now() + CLOSE_BUDGET_MS
    for (const tenant of [...this.indexes.keys()]) {
      const index = this.indexes.get(tenant)
      if (!index) continue
      this.insertFromTail(tenant, index, this.next(tenant), deadline)
      if (index.dirty > 0) await this.saves.writeNow(tenant)
    }
  }

  private catchUp(tenant: string): Promise<void> {
    const running = this.draining.get(tenant)
    if (running) return running
    if ((this.retryAt.get(tenant) ?? 0) > Date.now()) return Promise.resolve()
    // Started a microtask later, so the entry is in the map before drain() can remove it.
    const done = Promise.resolve().then(() => this.drain(tenant))
    this.draining.set(tenant, done)
    return done
  }

  /**
   * Inserts the labels from `covered` up to LMDB's next label, a few milliseconds per turn of
   * the event loop; labels whose vectors are not in memory are embedded from their content
   * first. Never rejects: a failure is logged and retried a little later.
   */
  private async drain(tenant: string): Promise<void> {
    try {
      for (;;) {
        const index = this.indexes.get(tenant)
        const next = this.next(tenant)
        if (this.closing || !index || index.covered >= next) break
        const outcome = this.insertFromTail(
          tenant,
          index,
          next,
          performance.now() + (next - index.covered > BIG_BACKLOG ? BIG_SLICE_MS : SLICE_MS),
        )
        if (outcome === 'stop') break
        if (outcome === 'embed') await this.embedMissing(tenant, index.covered, next)
        else await new Promise<void>((r) => setImmediate(r))
      }
      this.retryAt.delete(tenant)
      this.caughtUp(tenant)
    } catch (err) {
      this.retryAt.set(tenant, Date.now() + RETRY_MS)
      this.opts.logger.error(
        { err, tenant_key: tenantKey(tenant) },
        'indexing memory entries failed; searches scan what the index lacks, and it is tried again',
      )
    } finally {
      this.draining.delete(tenant)
    }
  }

  /**
   * Inserts labels from `covered` on, in order, while their vectors are in the tail, until
   * `next` or the deadline: 'embed' when the next live label has no vector in memory.
   * Synchronous, so a deletion committed meanwhile is applied before or after, never between.
   */
  private insertFromTail(tenant: string, index: TenantIndex, next: number, deadline: number): 'ok' | 'embed' | 'retry' | 'stop' {
    const tail = this.tail(tenant)
    let n = 0
    while (index.covered < next) {
      if ((++n & 15) === 0 && performance.now() > deadline) return 'ok'
      const label = index.covered
      const vector = tail.get(label)
      if (vector === undefined) {
        if (this.db.entries.doesExist([tenant, label])) return 'embed'
        index.covered = label + 1 // deleted
        continue
      }
      if (vector === null) {
        this.opts.logger.warn(
          { tenant_key: tenantKey(tenant), label },
          'the embedder gave a memory entry a vector of the wrong length: the entry is found by keywords only',
        )
        tail.delete(label)
        index.covered = label + 1
        continue
      }
      try {
        index.add(label, Array.from(vector))
        tail.delete(label)
      } catch (err) {
        if (this.rebuilding.has(tenant)) {
          // A fresh index fails too: stop here; the next add resumes, searches scan the rest.
          this.opts.logger.error(
            { err, tenant_key: tenantKey(tenant), label },
            'rebuilding a memory index failed; searches scan what it lacks',
          )
          return 'stop'
        }
        this.replace(tenant, err, 'inserting into a memory index failed: rebuilding it from LMDB', label)
        return 'retry'
      }
    }
    return 'ok'
  }

  /** Embeds the content of up to EMBED_BATCH live entries from `from` whose vectors are not in memory, into the tail. */
  private async embedMissing(tenant: string, from: number, next: number): Promise<void> {
    const tail = this.tail(tenant)
    const batch: Array<{ label: number; content: string }> = []
    for (const { key, value } of this.db.entries.getRange({ start: [tenant, from], end: [tenant, next] })) {
      if (batch.length === EMBED_BATCH) break
      if (!tail.has(key[1] as number)) batch.push({ label: key[1] as number, content: value.content })
    }
    if (batch.length === 0) return
    const vectors = await this.opts.embedder.embed(batch.map((b) => b.content))
    // After the await: only entries still there, and not inserted meanwhile by another index.
    const covered = this.indexes.get(tenant)?.covered ?? 0
    batch.forEach((b, i) => {
      if (b.label >= covered && this.db.entries.doesExist([tenant, b.label])) tail.set(b.label, this.checked(vectors[i]!))
    })
  }

  private checked(vector: readonly number[]): Float32Array | null {
    return vector.length === this.opts.dim ? Float32Array.from(vector) : null
  }

  private tail(tenant: string): Map<number, Float32Array | null> {
    let tail = this.tails.get(tenant)
    if (!tail) {
      tail = new Map()
      this.tails.set(tenant, tail)
    }
    return tail
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
      this.saves.schedule(tenant)
    } else {
      this.saves.ifDue(tenant, index)
    }
  }

  private record(key: string): IndexFileRecord | undefined {
    return this.db.meta.get(recordKey(key)) as IndexFileRecord | undefined
  }

  private next(tenant: string): number {
    return this.db.stats.get(tenant)?.next ?? 0
  }
}
