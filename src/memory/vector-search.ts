import type { Embedder } from '../core/memory-store.js'
import { IndexRequestError, type IndexWorkerClient } from './index-worker-client.js'
import type { ScoreReply, SearchReply } from './index-worker-protocol.js'
import type { MemoryDb } from './memory-db.js'
import { cosine, type Ranked } from './memory-ranking.js'
import type { TenantState } from './tenant-index-state.js'
import type { VectorTail } from './vector-tail.js'

/** A search's vector side. */
export interface VectorSide {
  /** Best first, at most the `k` asked for. */
  ranked: Ranked[]
  /** Whether the label's vector was compared with the query (else it had none within reach: not embedded again yet, or in a worker that stopped). */
  compared(label: number): boolean
}

/** What the vector side works with (TenantIndexCache). */
export interface SearchContext {
  readonly db: MemoryDb
  readonly tail: VectorTail
  readonly client: IndexWorkerClient
  readonly embedder: Embedder
  readonly dim: number
  open(tenant: string): TenantState
  /** The state once its index is loaded, or once it is clear that it will not be soon. */
  loaded(tenant: string): Promise<TenantState>
  /** After a search: the index may lag behind LMDB (feeds it). */
  searched(tenant: string, st: TenantState): void
  /** A native call on the index threw: it is replaced. */
  broken(tenant: string, err: unknown): void
}

const best = (a: Ranked, b: Ranked) => b.score - a.score || a.label - b.label

/** The vector side of searches: the index in the worker, the waiting vectors here. None of these promises rejects. */
export class VectorSearch {
  constructor(private readonly c: SearchContext) {}

  /**
   * Starts a search for the nearest labels by cosine among all of the tenant's vectors: the
   * index, searched in the worker at `ef` (default efSearch), plus an exact scan of what it does
   * not cover yet — done here at once. The request leaves before this returns, so the caller's
   * own work (the keyword side) overlaps the worker's search; then it collects. Without the
   * worker, the waiting vectors still answer. `lone`: no other search is in flight, so the
   * request may take the search lane (search-lane.ts), whose answer this thread polls for.
   */
  nearest(tenant: string, vector: readonly number[], k: number, ef?: number, lone = false): { collect(): Promise<VectorSide> } {
    const st = this.c.open(tenant)
    if (!st.loaded) return { collect: () => this.c.loaded(tenant).then((now) => this.ask(tenant, now, vector, k, ef, lone)) }
    const answer = this.ask(tenant, st, vector, k, ef, lone)
    return { collect: () => answer }
  }

  /** Asks the worker (synchronously, when it holds the index) and merges its answer with the waiting vectors it did not hold yet. */
  private ask(
    tenant: string,
    st: TenantState,
    vector: readonly number[],
    k: number,
    ef: number | undefined,
    lone: boolean,
  ): Promise<VectorSide> {
    let asked: Promise<SearchReply> | undefined
    if (st.loaded && this.c.client.running) asked = this.c.client.search({ key: st.key, vector, k, ef }, lone)
    // What waits in memory now: the worker's answer says which of these it already held.
    return this.merged(tenant, st, asked, this.c.tail.scan(tenant, vector, st.covered), k)
  }

  private async merged(
    tenant: string,
    st: TenantState,
    asked: Promise<SearchReply> | undefined,
    waiting: Ranked[],
    k: number,
  ): Promise<VectorSide> {
    const found: Ranked[] = []
    let held = st.covered
    let indexed = 0
    if (asked) {
      try {
        const r = await asked
        if (r.epoch === st.epoch) {
          for (let i = 0; i < r.labels.length; i++) found.push({ label: r.labels[i]!, score: r.scores[i]! })
          held = indexed = r.covered
        }
      } catch (err) {
        if (err instanceof IndexRequestError && err.broken) this.c.broken(tenant, err)
      }
    }
    for (const w of waiting) if (w.label >= held) found.push(w)
    this.c.searched(tenant, st)
    let scanned: Set<number> | undefined
    return {
      ranked: found.sort(best).slice(0, k),
      compared: (label) => label < indexed || (scanned ??= new Set(waiting.map((w) => w.label))).has(label),
    }
  }

  /**
   * Exact cosine of `vector` against the given labels' vectors, best `k` first: the index's in
   * the worker, and those waiting in memory here — asked of the worker too once handed to it
   * (it makes them first when that is quick), so a label scores as the index scores it whichever
   * way the race with its insert went. Labels without a vector within reach are left out.
   */
  async scoreLabels(tenant: string, labels: Iterable<number>, vector: readonly number[], k: number): Promise<VectorSide> {
    const st = await this.c.loaded(tenant)
    const scores = new Map<number, number>()
    const ask: number[] = []
    for (const label of labels) {
      const v = this.c.tail.get(tenant, label)
      if (v) scores.set(label, cosine(vector, v))
      if (v === undefined ? label < st.covered : v !== null && label < st.sent) ask.push(label)
    }
    if (ask.length > 0 && st.loaded && this.c.client.running) {
      const q = Float64Array.from(vector)
      const ls = Float64Array.from(ask)
      try {
        const r = await this.c.client.request<ScoreReply>({ type: 'score', key: st.key, vector: q, labels: ls }, [q.buffer, ls.buffer])
        for (let i = 0; i < r.labels.length; i++) scores.set(r.labels[i]!, r.scores[i]!)
      } catch {
        /* the worker stopped: the waiting vectors' scores stand */
      }
    }
    return {
      ranked: [...scores]
        .map(([label, score]) => ({ label, score }))
        .sort(best)
        .slice(0, k),
      compared: (label) => scores.has(label),
    }
  }

  /**
   * Keyword candidates whose vectors the vector side could not compare — embedded again after a
   * restart or a rebuild (waiting now, or not yet), or in a worker that stopped — are scored
   * exactly, embedded on the spot when they are nowhere, so a hybrid ranking does not count them
   * as unlike the query. A background embedder (too slow for a request) leaves those to the
   * keywords, as does an embedder error. Returns the vector side's best `want`; in steady state
   * every candidate was compared and it is `side.ranked` unchanged.
   */
  async complete(
    tenant: string,
    query: readonly number[],
    side: VectorSide,
    candidates: readonly Ranked[],
    want: number,
  ): Promise<Ranked[]> {
    const extra: Ranked[] = []
    const missing: Array<{ label: number; content: string }> = []
    for (const { label } of candidates) {
      if (side.compared(label)) continue
      const v = this.c.tail.get(tenant, label)
      if (v) extra.push({ label, score: cosine(query, v) })
      else if (v === undefined && !this.c.embedder.background) {
        const e = this.c.db.entries.get([tenant, label])
        if (e) missing.push({ label, content: e.content })
      }
    }
    if (missing.length > 0) {
      try {
        const vectors = await this.c.embedder.embed(missing.map((m) => m.content))
        missing.forEach((m, i) => {
          if (vectors[i]?.length === this.c.dim) extra.push({ label: m.label, score: cosine(query, vectors[i]!) })
        })
      } catch {
        /* the keywords still rank them */
      }
    }
    return extra.length === 0 ? side.ranked : [...side.ranked, ...extra].sort(best).slice(0, want)
  }
}
