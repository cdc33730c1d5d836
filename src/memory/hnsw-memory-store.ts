import { randomUUID } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { BurrowError } from '../core/errors.js'
import { WriteHealth } from '../core/write-health.js'
import type { Logger } from '../core/logger.js'
import { SILENT_LOGGER } from '../core/logger.js'
import {
  matchesMetadata,
  type Embedder,
  type MemoryEntry,
  type MemoryHit,
  type MemoryListQuery,
  type MemoryPage,
  type MemoryQuery,
  type MemoryStore,
  type NewMemoryEntry,
} from '../core/memory-store.js'
import { termFrequencies } from './bm25.js'
import type { KeywordIndex } from './keyword-index.js'
import { buildKeywordIndex } from './keyword-build.js'
import { DEFAULT_HNSW, type HnswParams } from './hnsw-params.js'
import { removeSavedIndexes } from './index-dir.js'
import { memoryProbe, publicEntry, type MemoryDb, type StoredEntry } from './memory-db.js'
import { openUpgraded } from './memory-upgrade.js'
import { encodeBlock } from './posting-blocks.js'
import { dropPostings, removeLabel } from './memory-removal.js'
import { listEntries } from './memory-listing.js'
import { CANDIDATES, exactMatches, fusionFor, rank, type Ranked } from './memory-ranking.js'
import { RECORD_PREFIX, TenantIndexCache } from './tenant-index-cache.js'
import type { VectorSide } from './vector-search.js'
import { tokenize } from './text-features.js'

export interface HnswMemoryOptions {
  dataDir: string
  embedder: Embedder
  durability: 'fsync' | 'relaxed'
  logger?: Logger
  hnsw?: HnswParams
  /** Save a tenant's index once its changes reach `saveGrowth` (default 0.2) × its size and at least `saveEvery` (default 1,000); and at close. */
  saveEvery?: number
  saveGrowth?: number
}

const ENTRIES = 'memory entries'

/**
 * Semantic memory on LMDB + hnswlib. LMDB holds the truth (entries and their keyword
 * postings, in blocks); vectors are derived from the content, and each tenant's HNSW index
 * is a cache (see TenantIndexCache), held by a worker thread: filled in the background after `add()` acknowledges,
 * saved as it grows and at close, checked before it is loaded, rebuilt from LMDB when
 * damaged, and completed by an exact scan of whatever it does not cover yet — so nothing
 * acknowledged is lost to a crash and no state of the index file fails a request. Every
 * tenant has its own index: no query can reach another tenant's vectors.
 *
 * Writes are observed: one that cannot be made durable (disk full, I/O error) throws
 * `STORE_UNAVAILABLE` and leaves nothing half-done, reads go on working, and writes work
 * again once the disk does. An `add()` whose entries are committed always succeeds.
 */
export class HnswMemoryStore implements MemoryStore {
  /** Per tenant, the keyword statistics in memory (a cache of the postings in LMDB, built on first search). */
  private readonly keywords = new Map<string, KeywordIndex>()
  private readonly cache: TenantIndexCache
  private readonly writes: WriteHealth
  private readonly indexDir: string
  private readonly efHybrid: number | undefined
  private closed = false

  private constructor(
    private readonly db: MemoryDb,
    private readonly opts: HnswMemoryOptions,
  ) {
    this.indexDir = join(opts.dataDir, 'memory', 'hnsw')
    const params = opts.hnsw ?? DEFAULT_HNSW
    this.efHybrid = params.efHybrid
    mkdirSync(this.indexDir, { recursive: true })
    this.writes = new WriteHealth(memoryProbe(db))
    this.cache = new TenantIndexCache(db, this.writes, {
      dir: this.indexDir,
      dim: opts.embedder.dimensions,
      params,
      embedder: opts.embedder,
      saveEvery: opts.saveEvery ?? 1000,
      saveGrowth: opts.saveGrowth ?? 0.2,
      logger: opts.logger ?? SILENT_LOGGER,
    })
  }

  static async open(opts: HnswMemoryOptions): Promise<HnswMemoryStore> {
    const db = await openUpgraded(opts.dataDir, opts.durability, opts.logger ?? SILENT_LOGGER)
    let store: HnswMemoryStore | undefined
    try {
      store = new HnswMemoryStore(db, opts)
      await store.checkEmbedder()
      return store
    } catch (err) {
      await store?.cache.close().catch(() => undefined)
      await db.root.close().catch(() => undefined)
      throw err
    }
  }

  /**
   * A different embedder than the one the vectors were made with: the index files go, and each
   * tenant's index is built again from the entries' content in the background (searches find
   * by keywords what it does not hold yet).
   */
  private async checkEmbedder(): Promise<void> {
    const previous = this.db.meta.get('embedder') as string | undefined
    const id = this.opts.embedder.id
    if (previous === id) return
    if (previous !== undefined)
      this.opts.logger?.warn({ from: previous, to: id }, 'embedder changed: memory vectors are made again in the background')
    removeSavedIndexes(this.indexDir)
    await this.writes.run(
      () =>
        this.db.meta.transaction(() => {
          for (const key of this.db.meta.getKeys({ start: RECORD_PREFIX, end: `${RECORD_PREFIX}\uffff` })) this.db.meta.remove(key)
          for (const key of this.db.tombstones.getKeys()) this.db.tombstones.remove(key)
          this.db.meta.put('embedder', id)
        }),
      ENTRIES,
    )
  }

  async add(entries: readonly NewMemoryEntry[]): Promise<MemoryEntry[]> {
    if (entries.length === 0) return []
    this.assertOpen()
    // A slow embedder (use-lite) runs off the request path: the entries are acknowledged without
    // vectors and embedded from their content in the background, found by their words meanwhile.
    const vectors = this.opts.embedder.background ? null : await this.opts.embedder.embed(entries.map((e) => e.content))
    const now = new Date().toISOString()
    const prepared = entries.map((e, i) => {
      const tokens = tokenize(e.content)
      const entry: StoredEntry = { ...e, id: randomUUID(), created_at: now, len: tokens.length }
      return { entry, tf: termFrequencies(tokens), vector: vectors?.[i], label: -1 }
    })
    const tenants = new Set(entries.map((e) => e.tenant))
    // Loaded before the commit, so the index's state (saved file, missing, damaged) is judged
    // against LMDB as it was; everything committed below is inserted after.
    for (const tenant of tenants) this.cache.open(tenant)
    const deleted = await this.writes.run(
      () =>
        this.db.entries.childTransaction(() => {
          // Checked in the transaction that would write: a deletion is either before it (and
          // nothing is added) or after it (and removes these entries too).
          const gone = prepared.find(
            (p) => p.entry.session_id && this.db.deletedSessions.get([p.entry.tenant, p.entry.session_id]) !== undefined,
          )
          if (gone) return gone.entry.session_id
          const blocks = new Map<string, Array<{ label: number; tf: Map<string, number> }>>()
          for (const p of prepared) {
            const tenant = p.entry.tenant
            const stats = this.db.stats.get(tenant) ?? { docs: 0, totalLength: 0, next: 0 }
            const label = stats.next
            p.label = label
            this.db.stats.put(tenant, { docs: stats.docs + 1, totalLength: stats.totalLength + p.entry.len, next: label + 1 })
            this.db.entries.put([tenant, label], p.entry)
            this.db.ids.put(p.entry.id, [tenant, label])
            if (p.entry.session_id) this.db.bySession.put([tenant, p.entry.session_id, label], 1)
            let block = blocks.get(tenant)
            if (!block) blocks.set(tenant, (block = []))
            block.push({ label, tf: p.tf })
          }
          // One posting block per tenant: this call's labels of a tenant are consecutive.
          for (const [tenant, docs] of blocks) this.db.blocks.put([tenant, docs[0]!.label], encodeBlock(docs[0]!.label, docs))
          return null
        }),
      ENTRIES,
    )
    if (deleted) throw new BurrowError('SESSION_NOT_FOUND', `Session ${deleted} was deleted; its memories are not kept.`)
    // Applied at once after the commit (commits resolve in order): an index that cannot take
    // a label in order is dropped and built again from LMDB on the next search.
    for (const p of prepared) {
      const ix = this.keywords.get(p.entry.tenant)
      if (ix && !ix.add(p.label, p.tf)) this.keywords.delete(p.entry.tenant)
    }
    // Committed (with fsync durability: on disk): acknowledged. Nothing below may fail the
    // call — a retry would add the entries twice. The vectors wait in memory, found by an
    // exact scan, while the HNSW index takes them in the background.
    for (const tenant of tenants)
      this.cache.added(
        tenant,
        prepared.flatMap((p) => (p.entry.tenant === tenant && p.vector ? [{ label: p.label, vector: p.vector }] : [])),
      )
    return prepared.map((p) => publicEntry(p.entry))
  }

  async search(q: MemoryQuery): Promise<MemoryHit[]> {
    const stats = this.db.stats.get(q.tenant)
    if (!stats || stats.docs === 0) return []
    const mode = q.mode ?? 'hybrid'
    const want = Math.max(CANDIDATES, q.limit)
    const filtered = this.candidates(q)
    let vectorSide: { collect(): Promise<VectorSide> } | undefined
    let v: number[] | undefined
    if (mode !== 'keyword') {
      v = (await this.opts.embedder.embed([q.text]))[0]!
      if (filtered) {
        // Filtered searches rank their candidates exactly (filtered HNSW search degrades).
        const scored = this.cache.search.scoreLabels(q.tenant, filtered, v, want)
        vectorSide = { collect: () => scored }
      } else {
        vectorSide = this.cache.search.nearest(q.tenant, v, want, mode === 'hybrid' ? this.efHybrid : undefined)
      }
    }
    // While the index worker searches: the keyword side, read in one synchronous step with the keyword index.
    let keyword: Ranked[] = []
    let exact: Set<number> | undefined
    try {
      const keywords = this.keywordIndex(q.tenant)
      if (mode !== 'vector') keyword = keywords.top(tokenize(q.text), want, filtered && ((label) => filtered.has(label)))
      if (mode === 'hybrid') exact = exactMatches(keywords, q.text)
    } catch (err) {
      void vectorSide?.collect()
      throw err
    }
    // Keyword candidates the vector side could not compare (after a restart) are scored too.
    const vector = vectorSide && v ? await this.cache.search.complete(q.tenant, v, await vectorSide.collect(), keyword, want) : []
    const hits: MemoryHit[] = []
    for (const r of rank(mode, vector, keyword, q.limit, exact, fusionFor(this.opts.embedder.id))) {
      const e = this.db.entries.get([q.tenant, r.label])
      if (e) hits.push({ entry: publicEntry(e), score: r.score })
    }
    return hits
  }

  /**
   * The labels a session scope or metadata filter admits (undefined: every entry). They are
   * ranked exactly — filtered HNSW search degrades — so `limit` hits come back when enough match.
   */
  private candidates(q: { tenant: string; sessionId?: string | undefined; metadata?: MemoryQuery['metadata'] }): Set<number> | undefined {
    const filter = q.metadata && Object.keys(q.metadata).length > 0 ? q.metadata : undefined
    if (!q.sessionId && !filter) return undefined
    const labels = new Set<number>()
    const keep = (label: number, e = filter && this.db.entries.get([q.tenant, label])) => {
      if (!filter || (e && matchesMetadata(e.metadata, filter))) labels.add(label)
    }
    if (q.sessionId) {
      for (const key of this.db.bySession.getKeys({ start: [q.tenant, q.sessionId, 0], end: [q.tenant, q.sessionId, Infinity] }))
        keep(key[2] as number)
    } else {
      for (const { key, value } of this.db.entries.getRange({ start: [q.tenant, 0], end: [q.tenant, Infinity] })) keep(key[1], value)
    }
    return labels
  }

  /** The tenant's keyword index: in memory, else built from its posting blocks in LMDB. */
  keywordIndex(tenant: string): KeywordIndex {
    let ix = this.keywords.get(tenant)
    if (!ix) {
      ix = buildKeywordIndex(this.db, tenant)
      this.keywords.set(tenant, ix)
    }
    return ix
  }

  async deleteSession(tenant: string, sessionId: string): Promise<number> {
    this.assertOpen()
    const removed: Array<{ label: number; terms: Set<string> }> = []
    const labels = await this.writes.run(
      () =>
        this.db.entries.childTransaction(() => {
          removed.length = 0
          const out: number[] = []
          const stats = this.db.stats.get(tenant) ?? { docs: 0, totalLength: 0, next: 0 }
          for (const key of this.db.bySession.getKeys({ start: [tenant, sessionId, 0], end: [tenant, sessionId, Infinity] })) {
            const label = key[2] as number
            const terms = removeLabel(this.db, tenant, label, stats)
            if (terms) removed.push({ label, terms })
            this.db.bySession.remove(key)
            out.push(key[2] as number)
          }
          dropPostings(this.db, tenant, out)
          // Session ids are never reused: the mark keeps late writes (a queued indexing batch,
          // an add racing the deletion) from bringing the session's memories back.
          this.db.deletedSessions.put([tenant, sessionId], Date.now())
          if (out.length > 0) this.db.stats.put(tenant, stats)
          return out
        }),
      ENTRIES,
    )
    const ix = this.keywords.get(tenant)
    if (ix && !removed.every((r) => ix.remove(r.label, r.terms))) this.keywords.delete(tenant)
    this.cache.removed(tenant, labels)
    return labels.length
  }

  /** The entry's label when it is the tenant's (another tenant's id is as unknown as a made-up one). */
  private labelOf(tenant: string, id: string): number | undefined {
    const at = this.db.ids.get(id)
    return at && at[0] === tenant ? at[1] : undefined
  }

  async get(tenant: string, id: string): Promise<MemoryEntry | null> {
    const label = this.labelOf(tenant, id)
    const e = label === undefined ? undefined : this.db.entries.get([tenant, label])
    return e ? publicEntry(e) : null
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    this.assertOpen()
    let terms: Set<string> | undefined
    const label = await this.writes.run(
      () =>
        this.db.entries.childTransaction(() => {
          const l = this.labelOf(tenant, id)
          if (l === undefined || this.db.entries.get([tenant, l]) === undefined) return undefined
          const stats = this.db.stats.get(tenant) ?? { docs: 0, totalLength: 0, next: 0 }
          terms = removeLabel(this.db, tenant, l, stats)
          dropPostings(this.db, tenant, [l])
          this.db.stats.put(tenant, stats)
          return l
        }),
      ENTRIES,
    )
    if (label === undefined) return false
    // The keyword index follows the commit, as for adds; one that cannot is rebuilt from LMDB when next used.
    const ix = this.keywords.get(tenant)
    if (ix && !(terms && ix.remove(label, terms))) this.keywords.delete(tenant)
    this.cache.removed(tenant, [label])
    return true
  }

  async list(tenant: string, q: MemoryListQuery): Promise<MemoryPage> {
    return listEntries(this.db, tenant, q)
  }

  async count(tenant: string): Promise<number> {
    return this.db.stats.get(tenant)?.docs ?? 0
  }

  /**
   * False after a write failed (disk full, I/O error), true again once one succeeds; reads
   * work either way. While false, asking starts an occasional probe write (see core/write-health.ts).
   */
  healthy(): boolean {
    return !this.closed && this.writes.writable
  }

  /** Entries acknowledged but not yet in their tenant's HNSW index (of the tenants loaded). */
  indexBacklog(): number {
    return this.cache.backlog()
  }

  /** Saves every index with unsaved changes (failures are logged: LMDB has every entry). */
  async save(): Promise<void> {
    await this.cache.saveAll()
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.cache.close()
    this.keywords.clear()
    this.writes.close()
    await this.db.root.close()
  }

  /** Throws the tenant's index away and builds it again from the entries in LMDB, embedding them again (for measurements). */
  rebuildIndex(tenant: string): Promise<void> {
    return this.cache.rebuildNow(tenant)
  }

  /**
   * Labels the tenant's HNSW index covers (0 while it loads), asking the index worker for it —
   * its checked saved file, else a fresh one filled from LMDB — when it does not hold it yet.
   */
  indexCovered(tenant: string): number {
    return this.cache.covered(tenant)
  }

  /** Stops the index worker as a crash would (for tests): logged, started again, indexes reopened; no call fails. */
  crashIndexWorker(): Promise<void> {
    return this.cache.crashWorker()
  }

  private assertOpen(): void {
    if (this.closed) throw new BurrowError('SHUTTING_DOWN', 'The memory store is closed.')
  }
}
