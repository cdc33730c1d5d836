import { randomUUID, createHash } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import type { Logger } from '../core/logger.js'
import { SILENT_LOGGER } from '../core/logger.js'
import type { Embedder, MemoryEntry, MemoryHit, MemoryQuery, MemoryStore, NewMemoryEntry } from '../core/memory-store.js'
import { bm25, termFrequencies, type KeywordSource } from './bm25.js'
import { DEFAULT_HNSW, TenantIndex, removeSavedIndexes, type HnswParams } from './hnsw-index.js'
import { fromBytes, openMemoryDb, toBytes, type MemoryDb, type StoredEntry, type TenantStats } from './memory-db.js'
import { CANDIDATES, cosine, exactMatches, rank, type Ranked } from './memory-ranking.js'
import { tokenize } from './text-features.js'

export interface HnswMemoryOptions {
  dataDir: string
  embedder: Embedder
  durability: 'fsync' | 'relaxed'
  logger?: Logger
  hnsw?: HnswParams
  /** Save a tenant's index after this many changes (and at close). */
  saveEvery?: number
}

/**
 * Semantic memory on LMDB + hnswlib. LMDB holds the truth (entries, vectors, the BM25
 * postings); each tenant's HNSW index is a cache saved now and then and at close. On
 * open an index file is loaded and only labels newer than it are added from LMDB, so
 * nothing acknowledged is lost to a crash and opening does not re-embed or rebuild.
 * Every tenant has its own index: no query can reach another tenant's vectors.
 */
export class HnswMemoryStore implements MemoryStore {
  private readonly indexes = new Map<string, TenantIndex>()
  private readonly indexDir: string
  private readonly logger: Logger
  private readonly params: HnswParams
  private readonly saveEvery: number

  private constructor(private readonly db: MemoryDb, private readonly opts: HnswMemoryOptions) {
    this.indexDir = join(opts.dataDir, 'memory', 'hnsw')
    mkdirSync(this.indexDir, { recursive: true })
    this.logger = opts.logger ?? SILENT_LOGGER
    this.params = opts.hnsw ?? DEFAULT_HNSW
    this.saveEvery = opts.saveEvery ?? 2000
  }

  static async open(opts: HnswMemoryOptions): Promise<HnswMemoryStore> {
    const store = new HnswMemoryStore(openMemoryDb(opts.dataDir, opts.durability), opts)
    await store.checkEmbedder()
    return store
  }

  /** A different embedder than the one the vectors were made with: re-embed everything, drop the index files. */
  private async checkEmbedder(): Promise<void> {
    const previous = this.db.meta.get('embedder') as string | undefined
    const id = this.opts.embedder.id
    if (previous === id) return
    const entries = [...this.db.entries.getRange()]
    if (previous !== undefined && entries.length > 0) {
      this.logger.warn({ from: previous, to: id, entries: entries.length }, 'embedder changed: re-embedding memory')
      for (let i = 0; i < entries.length; i += 256) {
        const batch = entries.slice(i, i + 256)
        const vectors = await this.opts.embedder.embed(batch.map((e) => e.value.content))
        await this.db.vectors.transaction(() => { batch.forEach((e, j) => this.db.vectors.put(e.key as [string, number], toBytes(vectors[j]!))) })
      }
    }
    removeSavedIndexes(this.indexDir)
    await this.db.meta.put('embedder', id)
    await this.flush()
  }

  async add(entries: readonly NewMemoryEntry[]): Promise<MemoryEntry[]> {
    if (entries.length === 0) return []
    const vectors = await this.opts.embedder.embed(entries.map((e) => e.content))
    const now = new Date().toISOString()
    const prepared = entries.map((e, i) => {
      const tokens = tokenize(e.content)
      const entry: StoredEntry = { ...e, id: randomUUID(), created_at: now, len: tokens.length }
      return { entry, tf: termFrequencies(tokens), vector: vectors[i]! }
    })
    const labels = await this.db.entries.childTransaction(() => prepared.map((p) => {
      const tenant = p.entry.tenant
      const stats = this.db.stats.get(tenant) ?? { docs: 0, totalLength: 0, next: 0 }
      const label = stats.next
      this.db.stats.put(tenant, { docs: stats.docs + 1, totalLength: stats.totalLength + p.entry.len, next: label + 1 })
      this.db.entries.put([tenant, label], p.entry)
      this.db.vectors.put([tenant, label], toBytes(p.vector))
      this.db.ids.put(p.entry.id, [tenant, label])
      if (p.entry.session_id) this.db.bySession.put([tenant, p.entry.session_id, label], 1)
      for (const [term, n] of p.tf) this.db.postings.put([tenant, term, label], n)
      return label
    }))
    await this.flush()
    // The HNSW insert is CPU-bound: yield between slices so a big batch does not stall the loop.
    for (let i = 0; i < prepared.length; i++) {
      const tenant = prepared[i]!.entry.tenant
      const index = this.indexFor(tenant)
      if (labels[i]! >= index.covered) index.add(labels[i]!, prepared[i]!.vector)
      this.maybeSave(tenant, index)
      if (i % 100 === 99) await new Promise<void>((r) => setImmediate(r))
    }
    return prepared.map((p) => publicEntry(p.entry))
  }

  async search(q: MemoryQuery): Promise<MemoryHit[]> {
    const stats = this.db.stats.get(q.tenant)
    if (!stats || stats.docs === 0) return []
    const mode = q.mode ?? 'hybrid'
    const want = Math.max(CANDIDATES, q.limit)
    const accept = q.sessionId ? (label: number) => this.db.bySession.get([q.tenant, q.sessionId!, label]) !== undefined : undefined
    let vector: Ranked[] = []
    if (mode !== 'keyword') {
      const [v] = await this.opts.embedder.embed([q.text])
      vector = q.sessionId ? this.exact(q.tenant, q.sessionId, v!, want) : this.indexFor(q.tenant).search(v!, want)
    }
    const source = this.keywordSource(q.tenant, stats)
    const keyword = mode === 'vector' ? [] : bm25(source, tokenize(q.text), want, accept)
    const hits: MemoryHit[] = []
    for (const r of rank(mode, vector, keyword, q.limit, mode === 'hybrid' ? exactMatches(source, q.text) : undefined)) {
      const e = this.db.entries.get([q.tenant, r.label])
      if (e) hits.push({ entry: publicEntry(e), score: r.score })
    }
    return hits
  }

  /** Session scope: exact cosine over the session's own vectors (few, and filtered HNSW search degrades). */
  private exact(tenant: string, sessionId: string, v: readonly number[], k: number): Ranked[] {
    const out: Ranked[] = []
    for (const key of this.db.bySession.getKeys({ start: [tenant, sessionId, 0], end: [tenant, sessionId, Infinity] })) {
      const label = key[2] as number
      const bytes = this.db.vectors.get([tenant, label])
      if (bytes) out.push({ label, score: cosine(v, fromBytes(bytes)) })
    }
    return out.sort((a, b) => b.score - a.score || a.label - b.label).slice(0, k)
  }

  private keywordSource(tenant: string, stats: TenantStats): KeywordSource {
    return {
      stats: () => ({ docs: stats.docs, totalLength: stats.totalLength }),
      postings: (term) => this.db.postings.getRange({ start: [tenant, term, 0], end: [tenant, term, Infinity] }).map(({ key, value }) => ({ label: key[2] as number, tf: value })),
      length: (label) => this.db.entries.get([tenant, label])?.len ?? 0,
    }
  }

  async deleteSession(tenant: string, sessionId: string): Promise<number> {
    const labels = await this.db.entries.childTransaction(() => {
      const out: number[] = []
      const stats = this.db.stats.get(tenant) ?? { docs: 0, totalLength: 0, next: 0 }
      for (const key of this.db.bySession.getKeys({ start: [tenant, sessionId, 0], end: [tenant, sessionId, Infinity] })) {
        const label = key[2] as number
        const e = this.db.entries.get([tenant, label])
        if (e) {
          for (const term of new Set(tokenize(e.content))) this.db.postings.remove([tenant, term, label])
          this.db.ids.remove(e.id)
          stats.docs--
          stats.totalLength -= e.len
        }
        this.db.entries.remove([tenant, label])
        this.db.vectors.remove([tenant, label])
        this.db.bySession.remove(key)
        this.db.tombstones.put([tenant, label], 1)
        out.push(label)
      }
      this.db.stats.put(tenant, stats)
      return out
    })
    await this.flush()
    const index = this.indexes.get(tenant)
    if (index) for (const l of labels) index.remove(l)
    return labels.length
  }

  async count(tenant: string): Promise<number> {
    return this.db.stats.get(tenant)?.docs ?? 0
  }

  /** Saves every index with unsaved changes. */
  async save(): Promise<void> {
    for (const [tenant, index] of this.indexes) if (index.dirty > 0) await this.saveIndex(tenant, index)
  }

  async close(): Promise<void> {
    await this.save()
    await this.db.root.close()
  }

  /** Throws the tenant's index away and builds it again from the vectors in LMDB (for measurements and repairs). */
  rebuildIndex(tenant: string): TenantIndex {
    const index = TenantIndex.create(this.opts.embedder.dimensions, this.params)
    for (const { key, value } of this.db.vectors.getRange({ start: [tenant, 0], end: [tenant, Infinity] })) index.add(key[1] as number, fromBytes(value))
    index.covered = Math.max(index.covered, this.db.stats.get(tenant)?.next ?? 0)
    this.indexes.set(tenant, index)
    return index
  }

  /** Drops the tenant's in-memory index; the next use loads it from its file (for measurements). */
  unload(tenant: string): void {
    this.indexes.delete(tenant)
  }

  /** The tenant's index: in memory, else its saved file plus what came after, else built from LMDB. */
  indexFor(tenant: string): TenantIndex {
    let index = this.indexes.get(tenant)
    if (index) return index
    const key = tenantKey(tenant)
    const loaded = TenantIndex.load(this.indexDir, key, this.opts.embedder.dimensions, this.params)
    if (!loaded) {
      index = this.rebuildIndex(tenant)
    } else {
      index = loaded
      for (const t of this.db.tombstones.getKeys({ start: [tenant, 0], end: [tenant, Infinity] })) {
        if ((t[1] as number) < index.covered) index.remove(t[1] as number)
      }
      for (const { key: k, value } of this.db.vectors.getRange({ start: [tenant, index.covered], end: [tenant, Infinity] })) index.add(k[1] as number, fromBytes(value))
      index.covered = Math.max(index.covered, this.db.stats.get(tenant)?.next ?? 0)
      this.indexes.set(tenant, index)
    }
    return index
  }

  private maybeSave(tenant: string, index: TenantIndex): void {
    if (index.dirty >= this.saveEvery) void this.saveIndex(tenant, index).catch((err: unknown) => this.logger.warn({ err }, 'saving a memory index failed'))
  }

  private async saveIndex(tenant: string, index: TenantIndex): Promise<void> {
    const tombstones = [...this.db.tombstones.getKeys({ start: [tenant, 0], end: [tenant, Infinity] })]
    index.save(this.indexDir, tenantKey(tenant))
    if (tombstones.length > 0) await this.db.tombstones.transaction(() => { for (const t of tombstones) this.db.tombstones.remove(t) })
  }

  private async flush(): Promise<void> {
    if (this.opts.durability === 'fsync') await this.db.root.flushed
  }
}

function tenantKey(tenant: string): string {
  return createHash('sha256').update(tenant).digest('hex').slice(0, 24)
}

function publicEntry(e: StoredEntry): MemoryEntry {
  const { len: _len, ...rest } = e
  return rest
}
