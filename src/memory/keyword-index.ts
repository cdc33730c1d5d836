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
   * Over every slot (deleted ones too, so they only loosen it): the largest tf and the shortest
   * document — an upper bound of the term's score in any document ({@link termScore} grows
   * with tf and shrinks with the length).
   */
  maxTf: number
  minDl: number
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
  /** Scratch: per-label partial sums (0 = untouched; every BM25 term score is > 0), and the labels touched. */
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
   * MaxScore, term at a time (Turtle & Flood's max_score; the pruning Lucene, Tantivy and
   * PISA do document at a time): the query's terms in decreasing order of their upper bound
   * (the rarest first) add their scores into a dense accumulator; once the bounds of the
   * terms left cannot lift a document that none of the processed terms holds above the
   * `limit`-th best partial sum, the long postings of the common terms left are not read.
   * The documents that can still make it — partial sum + bounds left ≥ that sum — are taken
   * best partial first, and each is scored exactly by looking its label up (binary search)
   * in every term's sorted labels, summing in the reference's term order (first occurrence
   * in the query), so the floats are identical to `bm25()`'s; this stops at the first whose
   * partial sum + bounds left cannot beat the heap. The pruning tests, whose sums are taken
   * in another order, keep a relative slack of 1e-9. No allocation per posting.
   */
  top(queryTerms: readonly string[], limit: number, accept?: (label: number) => boolean): Array<{ label: number; score: number }> {
    const { docs, totalLength, lengths, live } = this
    if (docs === 0 || limit <= 0) return []
    const avgdl = totalLength / docs
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
      ub.push(termScore(w, list.maxTf, list.minDl, avgdl))
    }
    const m = lists.length
    if (m === 0) return []
    // order[i]: the term with the i-th largest bound; rest[i]: the sum of the bounds of order[i…].
    const order = Array.from({ length: m }, (_, j) => j).sort((a, b) => ub[b]! - ub[a]! || a - b)
    const rest = new Float64Array(m + 1)
    for (let i = m - 1; i >= 0; i--) rest[i] = (rest[i + 1]! + ub[order[i]!]!) * SLACK
    if (this.acc.length < this.covered) { this.acc = new Float64Array(this.lengths.length); this.touched = new Uint32Array(this.lengths.length) }
    const acc = this.acc
    const touched = this.touched
    let nt = 0
    let done = 0
    for (; done < m; done++) {
      // Could a document untouched so far still make it? Not when the bounds left are below the floor.
      if (done > 0 && rest[done]! < rest[0]! - rest[done]!) {
        if (rest[done]! < this.kthPartial(nt, limit)) break
      }
      const j = order[done]!
      const { labels, tfs, n } = lists[j]!
      const w = idf[j]!
      for (let i = 0; i < n; i++) {
        const label = labels[i]!
        if (!live[label]) continue
        if (accept && !accept(label)) continue
        if (acc[label] === 0) touched[nt++] = label
        acc[label] = acc[label]! + termScore(w, tfs[i]!, lengths[label]!, avgdl)
      }
    }
    const left = rest[done]!
    const exact = (label: number): number => {
      let score = 0
      for (let j = 0; j < m; j++) {
        const list = lists[j]!
        const p = find(list.labels, list.n, label)
        if (p >= 0) score += termScore(idf[j]!, list.tfs[p]!, lengths[label]!, avgdl)
      }
      return score
    }
    // The `limit` best partial sums first, scored exactly (marked done with -1): the heap's
    // floor is then a true score; then every other touched document that can still beat it.
    const best = new TopK(limit)
    for (let i = 0; i < nt; i++) best.offer(touched[i]!, acc[touched[i]!]!)
    const heap = new TopK(limit)
    for (const { label } of best.sorted()) { heap.offer(label, exact(label)); acc[label] = -1 }
    for (let i = 0; i < nt; i++) {
      const label = touched[i]!
      const a = acc[label]!
      if (a < 0 || (heap.full && (a + left) * SLACK < heap.worst)) continue
      if (heap.full && !this.canBeat(label, a, lists, idf, order, rest, done, avgdl, heap.worst)) continue
      heap.offer(label, exact(label))
    }
    for (let i = 0; i < nt; i++) acc[touched[i]!] = 0
    return heap.sorted()
  }

  /**
   * Whether a document with partial sum `a` over the terms order[0…done) can still score above
   * `worst`: the terms left are looked up, largest bound first, each replacing its bound by the
   * document's score for it, until the bound drops below `worst` (then false).
   */
  private canBeat(label: number, a: number, lists: PostingList[], idf: number[], order: number[], rest: Float64Array, done: number, avgdl: number, worst: number): boolean {
    for (let i = done; i < lists.length; i++) {
      const j = order[i]!
      const list = lists[j]!
      const p = find(list.labels, list.n, label)
      if (p >= 0) a += termScore(idf[j]!, list.tfs[p]!, this.lengths[label]!, avgdl)
      if ((a + rest[i + 1]!) * SLACK < worst) return false
    }
    return true
  }

  /** The `k`-th largest partial sum among the touched documents, with slack (a lower bound of their final scores); 0 when fewer. */
  private kthPartial(nt: number, k: number): number {
    if (nt < k) return 0
    const heap = new TopK(k)
    for (let i = 0; i < nt; i++) heap.offer(0, this.acc[this.touched[i]!]!)
    return heap.worst / SLACK
  }

  /** `dl`: the document's length (its bound is recomputed after a build, see {@link bound}). */
  private append(term: string, label: number, tf: number, dl: number): void {
    let list = this.terms.get(term)
    if (!list) {
      list = { labels: new Uint32Array(2), tfs: new Uint32Array(2), n: 0, df: 0, maxTf: 0, minDl: dl }
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
    if (tf > list.maxTf) list.maxTf = tf
    if (dl < list.minDl) list.minDl = dl
  }

  /** Recomputes a list's bounds over its live slots. */
  private bound(list: PostingList): void {
    let maxTf = 0
    let minDl = Infinity
    for (let i = 0; i < list.n; i++) {
      const label = list.labels[i]!
      if (!this.live[label]) continue
      if (list.tfs[i]! > maxTf) maxTf = list.tfs[i]!
      if (this.lengths[label]! < minDl) minDl = this.lengths[label]!
    }
    list.maxTf = maxTf
    list.minDl = minDl
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
    this.bound(list)
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
  return idf * (tf * (BM25_K1 + 1)) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * dl / avgdl))
}

/** The position of `label` among the first `n` sorted labels, or -1. */
function find(labels: Uint32Array, n: number, label: number): number {
  let lo = 0
  let hi = n - 1
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1
    const l = labels[mid]!
    if (l < label) lo = mid + 1
    else if (l > label) hi = mid - 1
    else return mid
  }
  return -1
}
