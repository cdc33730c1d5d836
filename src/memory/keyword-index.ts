import type { KeywordSource, KeywordStats, Posting } from './bm25.js'
import { BM25_B, BM25_K1 } from './bm25.js'
import type { TermCounts } from './posting-blocks.js'
import { maxScoreTop, type QueryList } from './max-score.js'

/** One term's postings: labels ascending, with their term frequencies; deleted labels stay until compacted. */
interface PostingList {
  labels: Uint32Array
  tfs: Uint32Array
  /**
   * Per slot, what its document's bound needs, kept next to the posting so that scoring reads
   * memory in order: the document's length times 4, plus its tf level (0: every term of the
   * document occurs once, 1: at most twice, 2: more).
   */
  docs: Uint32Array
  /** Slots used. */
  n: number
  /** Live postings among them (the document frequency). */
  df: number
  /**
   * The largest {@link impact} of any slot at the index's `refAvgdl` (deleted slots too, so they
   * only loosen it): times the term's idf, an upper bound of its score in any document while the
   * average document length is at most `refAvgdl` (the score grows with it). Valid while `gen` is
   * the index's `gen`; computed again on first use otherwise.
   */
  maxImpact: number
  gen: number
  /** The largest tf of any slot (deleted ones too). */
  maxTf: number
}

/**
 * A tenant's keyword statistics in memory, in compact typed form: the document length of
 * every label, and per term its postings as typed arrays. A cache of the posting blocks in
 * LMDB (the truth): built from them on first use (see keyword-build.ts), then kept up to date by the store after each
 * committed add or delete. Labels below `covered` are reflected; any change it cannot
 * apply in order is refused (the caller drops the index and it is built again).
 *
 * Scoring ({@link top}) gives exactly what `bm25()` gives over the same postings — each
 * document's score is the same float operations in the same order — but visits documents
 * in label order with MaxScore pruning (Turtle & Flood; as Lucene, Tantivy and PISA do) and
 * keeps the best `limit` in a bounded heap, so most postings of common terms are never scored.
 */
export class KeywordIndex implements KeywordSource {
  private lengths = new Uint32Array(1024)
  private live = new Uint8Array(1024)
  private readonly terms = new Map<string, PostingList>()
  private docs = 0
  private totalLength = 0
  /** Labels below this are reflected here (present or deleted). */
  covered = 0
  /** The average document length the lists' bounds are computed at (a little above the actual one), and its generation. */
  private refAvgdl = 0
  private gen = 0
  /** The longest document ever added (an upper bound of the live ones'). */
  private maxLength = 0

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
    let most = 0
    for (const [, n] of tf) {
      len += n
      if (n > most) most = n
    }
    const info = len * 4 + (most <= 1 ? 0 : most === 2 ? 1 : 2)
    for (const [term, n] of tf) this.append(term, label, n, info)
    if (len > this.maxLength) this.maxLength = len
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
   * Okapi BM25, best `limit` first, ties by label: the same result as `bm25(this, …)`, by
   * MaxScore (see max-score.ts), which reads only the query's lists and the liveness of the
   * documents that can make the heap.
   */
  top(queryTerms: readonly string[], limit: number, accept?: (label: number) => boolean): Array<{ label: number; score: number }> {
    const { docs, totalLength } = this
    if (docs === 0 || limit <= 0) return []
    const avgdl = totalLength / docs
    if (avgdl > this.refAvgdl) {
      // Bounds stay valid while the average length does not grow past this: 2 % of slack.
      this.refAvgdl = avgdl * 1.02
      this.gen++
    }
    // The terms with live postings, in the reference's order, with their idf and bound.
    const lists: QueryList[] = []
    for (const term of new Set(queryTerms)) {
      const list = this.terms.get(term)
      if (!list || list.df === 0) continue
      const idf = Math.log(1 + (docs - list.df + 0.5) / (list.df + 0.5))
      if (list.gen !== this.gen) this.bound(list)
      lists.push({ labels: list.labels, tfs: list.tfs, docs: list.docs, n: list.n, idf, maxTf: list.maxTf, bound: idf * list.maxImpact })
    }
    if (lists.length === 0) return []
    return maxScoreTop(lists, avgdl, this.maxLength, this.live, limit, accept)
  }

  /** `info`: the document's, see {@link PostingList.docs} (the list's bound is recomputed after a build, see {@link bound}). */
  private append(term: string, label: number, tf: number, info: number): void {
    let list = this.terms.get(term)
    if (!list) {
      list = {
        labels: new Uint32Array(2),
        tfs: new Uint32Array(2),
        docs: new Uint32Array(2),
        n: 0,
        df: 0,
        maxImpact: 0,
        gen: this.gen,
        maxTf: 0,
      }
      this.terms.set(term, list)
    }
    if (list.n === list.labels.length) {
      const labels = new Uint32Array(list.n * 2)
      labels.set(list.labels)
      const tfs = new Uint32Array(list.n * 2)
      tfs.set(list.tfs)
      list.labels = labels
      list.tfs = tfs
      const docs = new Uint32Array(list.n * 2)
      docs.set(list.docs)
      list.docs = docs
    }
    list.labels[list.n] = label
    list.tfs[list.n] = tf
    list.docs[list.n] = info
    list.n++
    list.df++
    if (tf > list.maxTf) list.maxTf = tf
    // Before the first search (gen 0) there is no reference length yet: bounds are computed at first use.
    if (this.gen > 0 && list.gen === this.gen) list.maxImpact = Math.max(list.maxImpact, impact(tf, info >>> 2, this.refAvgdl))
  }

  /** Recomputes a list's bound over its live slots, at the current reference length. */
  private bound(list: PostingList): void {
    let max = 0
    for (let i = 0; i < list.n; i++) {
      const label = list.labels[i]!
      if (!this.live[label]) continue
      const f = impact(list.tfs[i]!, list.docs[i]! >>> 2, this.refAvgdl)
      if (f > max) max = f
    }
    list.maxImpact = max
    list.gen = this.gen
  }

  /** Drops the deleted labels' slots from a list. */
  private compact(list: PostingList): void {
    let j = 0
    for (let i = 0; i < list.n; i++) {
      if (!this.live[list.labels[i]!]) continue
      list.labels[j] = list.labels[i]!
      list.tfs[j] = list.tfs[i]!
      list.docs[j] = list.docs[i]!
      j++
    }
    list.n = j
    list.gen = -1
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

/** A term's BM25 score in a document over its idf, at average document length `avgdl`: grows with `avgdl`. */
function impact(tf: number, dl: number, avgdl: number): number {
  return (tf * (BM25_K1 + 1)) / (tf + BM25_K1 * (1 - BM25_B + (BM25_B * dl) / avgdl))
}
