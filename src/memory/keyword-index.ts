import type { KeywordSource, KeywordStats, Posting } from './bm25.js'
import { BM25_B, BM25_K1 } from './bm25.js'
import type { TermCounts } from './posting-blocks.js'

/** One term's postings: labels ascending, with their term frequencies; deleted labels stay until compacted. */
interface PostingList {
  labels: Uint32Array
  tfs: Uint32Array
  /** Slots used. */
  n: number
  /** Live postings among them (the document frequency). */
  df: number
}

/**
 * A tenant's keyword statistics in memory, in compact typed form: the document length of
 * every label, and per term its postings as typed arrays. A cache of the posting blocks in
 * LMDB (the truth): built from them on first use (see keyword-build.ts), then kept up to date by the store after each
 * committed add or delete. Labels below `covered` are reflected; any change it cannot
 * apply in order is refused (the caller drops the index and it is built again).
 *
 * Scoring ({@link top}) gives exactly what `bm25()` gives over the same postings — the same
 * float operations in the same order — with a dense accumulator over the labels touched and
 * a bounded heap for the best `limit`, instead of a Map and a sort of every candidate.
 */
export class KeywordIndex implements KeywordSource {
  private lengths = new Uint32Array(1024)
  private live = new Uint8Array(1024)
  private readonly terms = new Map<string, PostingList>()
  private docs = 0
  private totalLength = 0
  /** Labels below this are reflected here (present or deleted). */
  covered = 0
  /** Scratch: per-label score accumulator (0 = untouched; every BM25 term score is > 0). */
  private acc = new Float64Array(0)
  private touched = new Uint32Array(0)

  /**
   * Labels below `upTo` that were never added are deleted ones (a build from LMDB skips them):
   * they count as covered.
   */
  skip(upTo: number): void {
    if (upTo <= this.covered) return
    this.grow(upTo)
    this.covered = upTo
  }

  /**
   * A committed document. Labels come in order: one below `covered` is already here (the
   * index was built after its commit) and is skipped; one past `covered` means a change was
   * missed, and it returns false (drop the index).
   */
  add(label: number, tf: TermCounts): boolean {
    if (label < this.covered) return true
    if (label > this.covered) return false
    this.grow(label + 1)
    let len = 0
    for (const [term, n] of tf) { this.append(term, label, n); len += n }
    this.lengths[label] = len
    this.live[label] = 1
    this.docs++
    this.totalLength += len
    this.covered = label + 1
    return true
  }

  /** A deleted document, with its distinct terms. False when the label is not covered yet (drop the index). */
  remove(label: number, terms: Iterable<string>): boolean {
    if (label >= this.covered) return false
    if (!this.live[label]) return true
    this.live[label] = 0
    this.docs--
    this.totalLength -= this.lengths[label]!
    this.lengths[label] = 0
    for (const term of terms) {
      const list = this.terms.get(term)
      if (!list) continue
      list.df--
      if (list.df === 0) this.terms.delete(term)
      else if (list.df * 2 < list.n) this.compact(list)
    }
    return true
  }

  stats(): KeywordStats {
    return { docs: this.docs, totalLength: this.totalLength }
  }

  *postings(term: string): Iterable<Posting> {
    const list = this.terms.get(term)
    if (!list) return
    for (let i = 0; i < list.n; i++) if (this.live[list.labels[i]!]) yield { label: list.labels[i]!, tf: list.tfs[i]! }
  }

  length(label: number): number {
    return label < this.covered ? this.lengths[label]! : 0
  }

  /** Whether the label is a live document here. */
  has(label: number): boolean {
    return label < this.covered && this.live[label] === 1
  }

  /**
   * Okapi BM25, best `limit` first, ties by label: the same result as `bm25(this, …)`.
   * Cost: the postings of the query's terms plus O(touched · log limit), no allocation per posting.
   */
  top(queryTerms: readonly string[], limit: number, accept?: (label: number) => boolean): Array<{ label: number; score: number }> {
    const { docs, totalLength } = this
    if (docs === 0 || limit <= 0) return []
    const avgdl = totalLength / docs
    if (this.acc.length < this.covered) { this.acc = new Float64Array(this.lengths.length); this.touched = new Uint32Array(this.lengths.length) }
    const acc = this.acc
    const touched = this.touched
    const lengths = this.lengths
    const live = this.live
    let nt = 0
    for (const term of new Set(queryTerms)) {
      const list = this.terms.get(term)
      if (!list || list.df === 0) continue
      const idf = Math.log(1 + (docs - list.df + 0.5) / (list.df + 0.5))
      const { labels, tfs, n } = list
      for (let i = 0; i < n; i++) {
        const label = labels[i]!
        if (!live[label]) continue
        if (accept && !accept(label)) continue
        const tf = tfs[i]!
        const dl = lengths[label]!
        const s = idf * (tf * (BM25_K1 + 1)) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * dl / avgdl))
        if (acc[label] === 0) touched[nt++] = label
        acc[label] = acc[label]! + s
      }
    }
    const heap = new TopK(limit)
    for (let i = 0; i < nt; i++) {
      const label = touched[i]!
      heap.offer(label, acc[label]!)
      acc[label] = 0
    }
    return heap.sorted()
  }

  private append(term: string, label: number, tf: number): void {
    let list = this.terms.get(term)
    if (!list) {
      list = { labels: new Uint32Array(2), tfs: new Uint32Array(2), n: 0, df: 0 }
      this.terms.set(term, list)
    }
    if (list.n === list.labels.length) {
      const labels = new Uint32Array(list.n * 2)
      labels.set(list.labels)
      const tfs = new Uint32Array(list.n * 2)
      tfs.set(list.tfs)
      list.labels = labels
      list.tfs = tfs
    }
    list.labels[list.n] = label
    list.tfs[list.n] = tf
    list.n++
    list.df++
  }

  /** Drops the deleted labels' slots from a list. */
  private compact(list: PostingList): void {
    let j = 0
    for (let i = 0; i < list.n; i++) {
      if (!this.live[list.labels[i]!]) continue
      list.labels[j] = list.labels[i]!
      list.tfs[j] = list.tfs[i]!
      j++
    }
    list.n = j
  }

  private grow(size: number): void {
    if (size <= this.lengths.length) return
    let cap = this.lengths.length
    while (cap < size) cap *= 2
    const lengths = new Uint32Array(cap)
    lengths.set(this.lengths)
    const live = new Uint8Array(cap)
    live.set(this.live)
    this.lengths = lengths
    this.live = live
  }
}

/**
 * The best `k` (label, score) pairs by score descending, label ascending — a bounded min-heap
 * whose root is the worst kept pair.
 */
export class TopK {
  private readonly labels: Uint32Array
  private readonly scores: Float64Array
  private size = 0

  constructor(private readonly k: number) {
    this.labels = new Uint32Array(k)
    this.scores = new Float64Array(k)
  }

  /** a ranks worse than b */
  private worse(sa: number, la: number, sb: number, lb: number): boolean {
    return sa < sb || (sa === sb && la > lb)
  }

  offer(label: number, score: number): void {
    const { labels, scores } = this
    if (this.size < this.k) {
      let i = this.size++
      while (i > 0) {
        const p = (i - 1) >> 1
        if (!this.worse(score, label, scores[p]!, labels[p]!)) break
        labels[i] = labels[p]!
        scores[i] = scores[p]!
        i = p
      }
      labels[i] = label
      scores[i] = score
      return
    }
    if (!this.worse(scores[0]!, labels[0]!, score, label)) return
    // Replace the root and sift down.
    let i = 0
    for (;;) {
      const l = 2 * i + 1
      if (l >= this.size) break
      const r = l + 1
      const c = r < this.size && this.worse(scores[r]!, labels[r]!, scores[l]!, labels[l]!) ? r : l
      if (!this.worse(scores[c]!, labels[c]!, score, label)) break
      labels[i] = labels[c]!
      scores[i] = scores[c]!
      i = c
    }
    labels[i] = label
    scores[i] = score
  }

  sorted(): Array<{ label: number; score: number }> {
    const out: Array<{ label: number; score: number }> = []
    for (let i = 0; i < this.size; i++) out.push({ label: this.labels[i]!, score: this.scores[i]! })
    return out.sort((a, b) => b.score - a.score || a.label - b.label)
  }
}
