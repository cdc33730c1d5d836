import { randomUUID } from 'node:crypto'
import { BurrowError } from '../core/errors.js'
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
import { bm25, termFrequencies, type KeywordSource, type Posting } from './bm25.js'
import { decodeMemoryCursor, memoryPage } from './memory-cursor.js'
import { CANDIDATES, cosine, exactMatches, fusionFor, rank, type Ranked } from './memory-ranking.js'
import { tokenize } from './text-features.js'

interface Tenant {
  entries: Map<number, MemoryEntry>
  vectors: Map<number, number[]>
  lengths: Map<number, number>
  postings: Map<string, Map<number, number>>
  totalLength: number
  next: number
}

/**
 * The reference memory store: everything in process memory, exact cosine over every
 * vector and in-memory BM25. What the HNSW store is measured against (recall, speed).
 */
export class BruteForceMemoryStore implements MemoryStore {
  private readonly tenants = new Map<string, Tenant>()
  /** `tenant\0session` of deleted sessions: nothing is added to them again. */
  private readonly deleted = new Set<string>()

  constructor(
    private readonly embedder: Embedder,
    private readonly now: () => Date = () => new Date(),
  ) {}

  private tenant(name: string): Tenant {
    let t = this.tenants.get(name)
    if (!t) {
      t = { entries: new Map(), vectors: new Map(), lengths: new Map(), postings: new Map(), totalLength: 0, next: 0 }
      this.tenants.set(name, t)
    }
    return t
  }

  async add(entries: readonly NewMemoryEntry[]): Promise<MemoryEntry[]> {
    const gone = entries.find((e) => e.session_id && this.deleted.has(`${e.tenant}\0${e.session_id}`))
    if (gone) throw new BurrowError('SESSION_NOT_FOUND', `Session ${gone.session_id} was deleted; its memories are not kept.`)
    const vectors = await this.embedder.embed(entries.map((e) => e.content))
    const out: MemoryEntry[] = []
    entries.forEach((e, i) => {
      const t = this.tenant(e.tenant)
      const label = t.next++
      const entry: MemoryEntry = { ...e, id: randomUUID(), created_at: this.now().toISOString() }
      const tokens = tokenize(e.content)
      t.entries.set(label, entry)
      t.vectors.set(label, vectors[i]!)
      t.lengths.set(label, tokens.length)
      t.totalLength += tokens.length
      for (const [term, tf] of termFrequencies(tokens)) {
        let p = t.postings.get(term)
        if (!p) {
          p = new Map()
          t.postings.set(term, p)
        }
        p.set(label, tf)
      }
      out.push(entry)
    })
    return out
  }

  async search(q: MemoryQuery): Promise<MemoryHit[]> {
    const t = this.tenants.get(q.tenant)
    if (!t || t.entries.size === 0) return []
    const mode = q.mode ?? 'hybrid'
    const accept = (label: number) => {
      const e = t.entries.get(label)
      return (!q.sessionId || e?.session_id === q.sessionId) && matchesMetadata(e?.metadata, q.metadata)
    }
    let vector: Ranked[] = []
    if (mode !== 'keyword') {
      const [v] = await this.embedder.embed([q.text])
      vector = [...t.vectors]
        .filter(([l]) => accept(l))
        .map(([label, vec]) => ({ label, score: cosine(v!, vec) }))
        .sort((a, b) => b.score - a.score || a.label - b.label)
        .slice(0, Math.max(CANDIDATES, q.limit))
    }
    const source = this.source(t)
    const keyword = mode === 'vector' ? [] : bm25(source, tokenize(q.text), Math.max(CANDIDATES, q.limit), accept)
    return rank(
      mode,
      vector,
      keyword,
      q.limit,
      mode === 'hybrid' ? exactMatches(source, q.text) : undefined,
      fusionFor(this.embedder.id),
    ).map((r) => ({ entry: t.entries.get(r.label)!, score: r.score }))
  }

  /** Exact nearest neighbours of a vector (the baseline the HNSW index is measured against). */
  nearest(tenant: string, vector: readonly number[], k: number): number[] {
    const t = this.tenants.get(tenant)
    if (!t) return []
    return [...t.vectors]
      .map(([label, vec]) => ({ label, score: cosine(vector, vec) }))
      .sort((a, b) => b.score - a.score || a.label - b.label)
      .slice(0, k)
      .map((r) => r.label)
  }

  private source(t: Tenant): KeywordSource {
    return {
      stats: () => ({ docs: t.entries.size, totalLength: t.totalLength }),
      postings: (term) => [...(t.postings.get(term) ?? [])].map(([label, tf]): Posting => ({ label, tf })),
      length: (label) => t.lengths.get(label) ?? 0,
    }
  }

  async deleteSession(tenant: string, sessionId: string): Promise<number> {
    this.deleted.add(`${tenant}\0${sessionId}`)
    const t = this.tenants.get(tenant)
    if (!t) return 0
    let n = 0
    for (const [label, e] of [...t.entries]) {
      if (e.session_id !== sessionId) continue
      this.remove(t, label)
      n++
    }
    return n
  }

  private remove(t: Tenant, label: number): void {
    t.entries.delete(label)
    t.vectors.delete(label)
    t.totalLength -= t.lengths.get(label) ?? 0
    t.lengths.delete(label)
    for (const p of t.postings.values()) p.delete(label)
  }

  private labelOf(tenant: string, id: string): { t: Tenant; label: number } | null {
    const t = this.tenants.get(tenant)
    for (const [label, e] of t?.entries ?? []) if (e.id === id) return { t: t!, label }
    return null
  }

  async get(tenant: string, id: string): Promise<MemoryEntry | null> {
    const found = this.labelOf(tenant, id)
    return found ? found.t.entries.get(found.label)! : null
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    const found = this.labelOf(tenant, id)
    if (found) this.remove(found.t, found.label)
    return found !== null
  }

  async list(tenant: string, q: MemoryListQuery): Promise<MemoryPage> {
    const after = decodeMemoryCursor(q.cursor)
    const out: { label: number; entry: MemoryEntry }[] = []
    for (const [label, entry] of this.tenants.get(tenant)?.entries ?? []) {
      if (out.length > q.limit) break
      if (label <= after || (q.sessionId && entry.session_id !== q.sessionId) || !matchesMetadata(entry.metadata, q.metadata)) continue
      out.push({ label, entry })
    }
    return memoryPage(out, q.limit)
  }

  async count(tenant: string): Promise<number> {
    return this.tenants.get(tenant)?.entries.size ?? 0
  }

  /** Nothing here can fail to write. */
  healthy(): boolean {
    return true
  }

  async close(): Promise<void> {}
}
