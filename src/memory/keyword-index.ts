import type { KeywordSource, KeywordStats, Posting } from './bm25.js'
import { BM25_B, BM25_K1 } from './bm25.js'
import type { TermCounts } from './posting-blocks.js'
import { TopK } from './top-k.js'

/** One term's postings: labels ascending, with their term frequencies; deleted labels stay until compacted. */
interface PostingList {
  labels: Uint32Array
  tfs: Uint32Array
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
}

/** Relative slack in the pruning tests: covers the rounding of sums taken in another order than the reference's. */
const SLACK = 1 + 1e-9

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
    for (const [, n] of tf) len += n
    for (const [term, n] of tf) this.append(term, label, n, len)
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
   *
   * MaxScore, document at a time (Turtle & Flood; as Lucene, Tantivy and PISA do): the query's
   * lists sorted by their upper bound, smallest first. Documents are visited in label order,
   * taken from the *essential* lists only — once the heap is full, a prefix of lists whose bounds
   * add up to less than the heap's worst score cannot lift a document on their own, so they are
   * no longer iterated but only looked up (a forward seek: cursors never move back) for the
   * documents the essential lists bring, largest bound first, and a document is dropped as soon as
   * its partial score plus the bounds left cannot beat the heap. On queries of common words the
   * prefix grows to every list but the rarest: the work is about that list's length, not the sum
   * of all lists. Each survivor's score is summed in the reference's term order (first occurrence
   * in the query), so the floats are identical to `bm25()`'s; the pruning tests, whose sums are
   * taken in another order, keep a relative slack of 1e-9. No allocation per posting.
   */
  top(queryTerms: readonly string[], limit: number, accept?: (label: number) => boolean): Array<{ label: number; score: number }> {
    const { docs, totalLength, lengths, live } = this
    if (docs === 0 || limit <= 0) return []
    const avgdl = totalLength / docs
    if (avgdl > this.refAvgdl) {
      // Bounds stay valid while the average length does not grow past this: 2 % of slack.
      this.refAvgdl = avgdl * 1.02
      this.gen++
    }
    // The terms with live postings, in the reference's order, with their idf and bound.
    const lists: PostingList[] = []
    const idf: number[] = []
    const ub: number[] = []
    for (const term of new Set(queryTerms)) {
      const list = this.terms.get(term)
      if (!list || list.df === 0) continue
      const w = Math.log(1 + (docs - list.df + 0.5) / (list.df + 0.5))
      lists.push(list)
      idf.push(w)
      if (list.gen !== this.gen) this.bound(list)
      ub.push(w * list.maxImpact)
    }
    const m = lists.length
    if (m === 0) return []
    // order[i]: the term with the i-th smallest bound; below[i]: the sum of the bounds of order[0…i).
    const order = Array.from({ length: m }, (_, j) => j).sort((a, b) => ub[a]! - ub[b]! || b - a)
    const below = new Float64Array(m + 1)
    for (let i = 0; i < m; i++) below[i + 1] = (below[i]! + ub[order[i]!]!) * SLACK
    const pos = new Uint32Array(m)
    /** The current document's score per term, by the reference's index (0 where absent). */
    const ts = new Float64Array(m)
    const heap = new TopK(limit)
    // Lists order[first…] are essential: they bring the documents.
    let first = 0
    for (;;) {
      let d = Infinity
      for (let i = first; i < m; i++) {
        const list = lists[order[i]!]!
        const p = pos[i]!
        if (p < list.n && list.labels[p]! < d) d = list.labels[p]!
      }
      if (d === Infinity) break
      let partial = 0
      for (let i = first; i < m; i++) {
        const j = order[i]!
        const list = lists[j]!
        const p = pos[i]!
        if (p < list.n && list.labels[p] === d) {
          const s = termScore(idf[j]!, list.tfs[p]!, lengths[d]!, avgdl)
          ts[j] = s
          partial += s
          pos[i] = p + 1
        } else ts[j] = 0
      }
      if (!live[d] || (accept && !accept(d))) continue
      let beaten = false
      for (let i = first - 1; i >= 0; i--) {
        if (heap.full && (partial + below[i + 1]!) * SLACK < heap.worst) {
          beaten = true
          break
        }
        const j = order[i]!
        const list = lists[j]!
        const p = seek(list.labels, list.n, pos[i]!, d)
        pos[i] = p
        if (p < list.n && list.labels[p] === d) {
          const s = termScore(idf[j]!, list.tfs[p]!, lengths[d]!, avgdl)
          ts[j] = s
          partial += s
        } else ts[j] = 0
      }
      if (beaten || (heap.full && partial * SLACK < heap.worst)) continue
      let score = 0
      for (let j = 0; j < m; j++) score += ts[j]!
      heap.offer(d, score)
      if (heap.full) while (first < m && below[first + 1]! < heap.worst) first++
    }
    return heap.sorted()
  }

  /** `dl`: the document's length (its bound is recomputed after a build, see {@link bound}). */
  private append(term: string, label: number, tf: number, dl: number): void {
    let list = this.terms.get(term)
    if (!list) {
      list = { labels: new Uint32Array(2), tfs: new Uint32Array(2), n: 0, df: 0, maxImpact: 0, gen: this.gen }
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
    // Before the first search (gen 0) there is no reference length yet: bounds are computed at first use.
    if (this.gen > 0 && list.gen === this.gen) list.maxImpact = Math.max(list.maxImpact, impact(tf, dl, this.refAvgdl))
  }

  /** Recomputes a list's bound over its live slots, at the current reference length. */
  private bound(list: PostingList): void {
    let max = 0
    for (let i = 0; i < list.n; i++) {
      const label = list.labels[i]!
      if (!this.live[label]) continue
      const f = impact(list.tfs[i]!, this.lengths[label]!, this.refAvgdl)
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

/** One term's BM25 score in one document — the reference's expression, operation for operation. */
function termScore(idf: number, tf: number, dl: number, avgdl: number): number {
  return (idf * (tf * (BM25_K1 + 1))) / (tf + BM25_K1 * (1 - BM25_B + (BM25_B * dl) / avgdl))
}

/** A term's BM25 score in a document over its idf, at average document length `avgdl`: grows with `avgdl`. */
function impact(tf: number, dl: number, avgdl: number): number {
  return (tf * (BM25_K1 + 1)) / (tf + BM25_K1 * (1 - BM25_B + (BM25_B * dl) / avgdl))
}

/** The first position at or after `from` among the first `n` sorted labels whose label is at least `label` (`n` when none): galloping, then binary search. */
function seek(labels: Uint32Array, n: number, from: number, label: number): number {
  if (from >= n || labels[from]! >= label) return from
  // labels[lo] < label; widen the step until labels[hi] >= label or the end.
  let lo = from
  let step = 1
  let hi = lo + 1
  while (hi < n && labels[hi]! < label) {
    lo = hi
    step *= 2
    hi = lo + step
  }
  if (hi > n) hi = n
  // The answer is in (lo, hi].
  lo++
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (labels[mid]! < label) lo = mid + 1
    else hi = mid
  }
  return lo
}
