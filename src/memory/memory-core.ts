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
  type NewMemoryEntry,
} from '../core/memory-store.js'
import { termFrequencies } from './bm25.js'
import type { KeywordIndex } from './keyword-index.js'
import { buildKeywordIndex } from './keyword-build.js'
import { DEFAULT_HNSW, type HnswParams } from './hnsw-params.js'
import { removeSavedIndexes } from './index-dir.js'
import { memoryProbe, publicEntry, type MemoryDb, type StoredEntry } from './memory-db.js'
import { listEntries } from './memory-listing.js'
import { CANDIDATES, exactMatches, fusionFor, rank, type Ranked } from './memory-ranking.js'
import { RECORD_PREFIX, TenantIndexCache } from './tenant-index-cache.js'
import type { VectorSide } from './vector-search.js'
import { tokenize } from './text-features.js'

export interface MemoryCoreOptions {
  dataDir: string
  embedder: Embedder
  logger?: Logger
  hnsw?: HnswParams
  /** Save a tenant's index once its changes reach `saveGrowth` (default 0.2) × its size and at least `saveEvery` (default 1,000); and at close. */
  saveEvery?: number
  saveGrowth?: number
}

/** An entry about to be committed: its term frequencies, its vector (absent with a background embedder), its label once assigned. */
export interface PreparedEntry {
  entry: StoredEntry
  tf: Map<string, number>
  vector: number[] | undefined
  label: number
}

export const ENTRIES = 'memory entries'

/**
 * A search takes the search lane to the index worker (search-lane.ts) only when no other is in
 * flight and none has overlapped another for this long. The lane's answer is polled for, and the
 * worker watches the lane for a moment after each: worth it for a caller searching alone (about a
 * third off its latency on a VM), not under load, where both threads have other work that the
 * polling takes CPU from (docs/benchmarks.md, memory-search).
 */
export const LONE_AFTER_MS = 100

/**
 * What every memory store of this folder shares once entries are in an LMDB environment of the
 * layout of memory-db.ts — the truth for HnswMemoryStore, a replica's local copy for
 * ReplicatedMemoryStore: each tenant's keyword statistics in memory (built from the posting
 * blocks on first search), its HNSW index in the index worker (TenantIndexCache), and the one
 * search path (candidates, both signals, `rank`). Stores commit entries their own way and then
 * tell the core (`added`, `removed`).
 */
export class MemoryCore {
  /** Per tenant, the keyword statistics in memory (a cache of the postings in LMDB, built on first search). */
  readonly keywords = new Map<string, KeywordIndex>()
  readonly cache: TenantIndexCache
  readonly writes: WriteHealth
  private readonly indexDir: string
  private readonly efHybrid: number | undefined
  closed = false
  /** Searches in flight, and when two last overlapped (see {@link LONE_AFTER_MS}). */
  private searching = 0
  private overlapAt = -Infinity

  constructor(
    readonly db: MemoryDb,
    private readonly opts: MemoryCoreOptions,
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

  get embedder(): Embedder {
    return this.opts.embedder
  }

  /**
   * A different embedder than the one the vectors were made with: the index files go, and each
   * tenant's index is built again from the entries' content in the background (searches find
   * by keywords what it does not hold yet).
   */
  async checkEmbedder(): Promise<void> {
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

  /**
   * Tokens, term frequencies and (unless the embedder runs in the background — then the entries
   * are acknowledged without vectors and embedded from their content later, found by their words
   * meanwhile) vectors of new entries, with fresh ids.
   */
  async prepare(entries: readonly NewMemoryEntry[], id: () => string): Promise<PreparedEntry[]> {
    const vectors = this.opts.embedder.background ? null : await this.opts.embedder.embed(entries.map((e) => e.content))
    const now = new Date().toISOString()
    return entries.map((e, i) => {
      const tokens = tokenize(e.content)
      const entry: StoredEntry = { ...e, id: id(), created_at: now, len: tokens.length }
      return { entry, tf: termFrequencies(tokens), vector: vectors?.[i], label: -1 }
    })
  }

  /**
   * Committed entries (their labels consecutive per tenant, in order): applied at once to the
   * keyword indexes — one that cannot take a label in order is dropped and built again from LMDB
   * on the next search — and handed to the HNSW cache, which indexes them in the background.
   * Never throws.
   */
  added(prepared: readonly PreparedEntry[]): void {
    for (const p of prepared) {
      const ix = this.keywords.get(p.entry.tenant)
      if (ix && !ix.add(p.label, p.tf)) this.keywords.delete(p.entry.tenant)
    }
    for (const tenant of new Set(prepared.map((p) => p.entry.tenant)))
      this.cache.added(
        tenant,
        prepared.flatMap((p) => (p.entry.tenant === tenant && p.vector ? [{ label: p.label, vector: p.vector }] : [])),
      )
  }

  /** Committed removals: the keyword index follows (or is rebuilt when next used), the HNSW index drops the labels. */
  removed(tenant: string, removed: ReadonlyArray<{ label: number; terms: Set<string> | undefined }>, labels: readonly number[]): void {
    const ix = this.keywords.get(tenant)
    if (ix && !removed.every((r) => r.terms && ix.remove(r.label, r.terms))) this.keywords.delete(tenant)
    this.cache.removed(tenant, labels)
  }

  async search(q: MemoryQuery): Promise<MemoryHit[]> {
    if (++this.searching > 1) this.overlapAt = performance.now()
    try {
      return await this.searchNow(q)
    } finally {
      this.searching--
    }
  }

  private async searchNow(q: MemoryQuery): Promise<MemoryHit[]> {
    const stats = this.db.stats.get(q.tenant)
    if (!stats || stats.docs === 0) return []
    const mode = q.mode ?? 'hybrid'
    // The search lane serves a caller searching alone; while searches overlap (a loaded server) they go by message.
    const lone = this.searching === 1 && performance.now() - this.overlapAt > LONE_AFTER_MS
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
        vectorSide = this.cache.search.nearest(q.tenant, v, want, mode === 'hybrid' ? this.efHybrid : undefined, lone)
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
    // A lone hybrid search waits for the worker with nothing else to do: it reads the keyword
    // side's best entries meanwhile (most hits come from them), and after fusion only the rest.
    const read = new Map<number, StoredEntry | undefined>()
    if (lone && mode === 'hybrid') for (const r of keyword.slice(0, q.limit)) read.set(r.label, this.db.entries.get([q.tenant, r.label]))
    // Keyword candidates the vector side could not compare (after a restart) are scored too.
    const vector = vectorSide && v ? await this.cache.search.complete(q.tenant, v, await vectorSide.collect(), keyword, want) : []
    const hits: MemoryHit[] = []
    for (const r of rank(mode, vector, keyword, q.limit, exact, fusionFor(this.opts.embedder.id))) {
      const e = read.has(r.label) ? read.get(r.label) : this.db.entries.get([q.tenant, r.label])
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

  /** The entry's label when it is the tenant's (another tenant's id is as unknown as a made-up one). */
  labelOf(tenant: string, id: string): number | undefined {
    const at = this.db.ids.get(id)
    return at && at[0] === tenant ? at[1] : undefined
  }

  get(tenant: string, id: string): MemoryEntry | null {
    const label = this.labelOf(tenant, id)
    const e = label === undefined ? undefined : this.db.entries.get([tenant, label])
    return e ? publicEntry(e) : null
  }

  list(tenant: string, q: MemoryListQuery): MemoryPage {
    return listEntries(this.db, tenant, q)
  }

  count(tenant: string): number {
    return this.db.stats.get(tenant)?.docs ?? 0
  }

  healthy(): boolean {
    return !this.closed && this.writes.writable
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.cache.close()
    this.keywords.clear()
    this.writes.close()
    await this.db.root.close()
  }

  assertOpen(): void {
    if (this.closed) throw new BurrowError('SHUTTING_DOWN', 'The memory store is closed.')
  }
}
