import { BM25_B, BM25_K1 } from './bm25.js'
import { TopK } from './top-k.js'

/** One query term's postings, as `KeywordIndex.top` hands them over (see its `PostingList`). */
export interface QueryList {
  labels: Uint32Array
  tfs: Uint32Array
  /** Per slot: the document's length times 4, plus its tf level (0: every tf 1, 1: at most 2, 2: more). */
  docs: Uint32Array
  /** Slots used. */
  n: number
  idf: number
  /** The largest tf of any slot. */
  maxTf: number
  /** An upper bound of the term's score in any document. */
  bound: number
}

/** Relative slack in the pruning tests: covers the rounding of sums taken in another order than the reference's. */
const SLACK = 1 + 1e-9
/** Past the last label: a label no list holds (an int32, so the traversal stays in integer arithmetic). */
const END = 0x7fffffff
/** The largest table of per-document bounds a query builds (entries); past it, documents are bounded by the lists' bounds only. */
const MAX_BOUND_ROWS = 1 << 14

/**
 * MaxScore, document at a time (Turtle & Flood; as Lucene, Tantivy and PISA do), over a query's
 * lists given in the reference's term order: the best `limit` labels by BM25, ties by label.
 *
 * The lists are sorted by bound, smallest first. Documents are visited in label order, taken from
 * the *essential* lists only — once the heap is full, a prefix of lists whose bounds add up to
 * less than the heap's worst score cannot lift a document on their own, so they are no longer
 * iterated but only looked up (a forward seek: cursors never move back) for the documents the
 * essential lists bring, largest bound first. A document is dropped as soon as its partial score
 * plus a bound of the terms left cannot beat the heap; that bound is the document's own, each
 * term's largest score at the document's length and tf level (read from the posting, so no other
 * memory is touched), and on common words it drops most documents before any lookup.
 *
 * Each survivor's score is summed in the reference's term order and each term's score is the
 * reference's expression, so the floats are identical to `bm25()`'s; the pruning tests, whose sums
 * are taken in another order, keep a relative slack of 1e-9. With one, two or three essential lists
 * (most of the work) the traversal runs a loop of its own over local copies of those lists: reading
 * a list through an array of lists costs several dependent loads per posting.
 */
export function maxScoreTop(
  lists: readonly QueryList[],
  avgdl: number,
  maxLength: number,
  live: Uint8Array,
  limit: number,
  accept?: (label: number) => boolean,
): Array<{ label: number; score: number }> {
  return new Traversal(lists, avgdl, maxLength, live, limit, accept).run()
}

class Traversal {
  private readonly m: number
  // By position i, the lists by growing bound; ref[i] is the list's index in the reference's order.
  private readonly labels: Uint32Array[] = []
  private readonly tfs: Uint32Array[] = []
  private readonly docs: Uint32Array[] = []
  private readonly n: Uint32Array
  private readonly idf: Float64Array
  private readonly ref: Uint32Array
  private readonly topTf: Uint32Array
  /** below[i]: the sum of the bounds of lists 0…i-1 (with the slack). */
  private readonly below: Float64Array
  /**
   * A document's own bounds, by its info (length and tf level): a row of m + 1 sums, the i-th of
   * the bounds of lists 0…i-1 at that length and level; computed on first use (negative before).
   */
  private readonly rows: Float64Array | undefined
  private readonly pos: Uint32Array
  /** The current document's score per term, by the reference's index (0 where absent). */
  private readonly ts: Float64Array
  private readonly heap: TopK
  private worst = -Infinity
  /** Lists first… are essential: they bring the documents. */
  private first = 0

  constructor(
    lists: readonly QueryList[],
    private readonly avgdl: number,
    maxLength: number,
    private readonly live: Uint8Array,
    limit: number,
    private readonly accept: ((label: number) => boolean) | undefined,
  ) {
    const m = (this.m = lists.length)
    const order = Array.from({ length: m }, (_, j) => j).sort((a, b) => lists[a]!.bound - lists[b]!.bound || b - a)
    this.n = new Uint32Array(m)
    this.idf = new Float64Array(m)
    this.ref = new Uint32Array(m)
    this.topTf = new Uint32Array(m)
    this.below = new Float64Array(m + 1)
    for (let i = 0; i < m; i++) {
      const list = lists[order[i]!]!
      this.labels.push(list.labels)
      this.tfs.push(list.tfs)
      this.docs.push(list.docs)
      this.n[i] = list.n
      this.idf[i] = list.idf
      this.ref[i] = order[i]!
      this.topTf[i] = list.maxTf
      this.below[i + 1] = (this.below[i]! + list.bound) * SLACK
    }
    const size = (maxLength + 1) * 4 * (m + 1)
    this.rows = size <= MAX_BOUND_ROWS ? new Float64Array(size).fill(-1) : undefined
    this.pos = new Uint32Array(m)
    this.ts = new Float64Array(m)
    this.heap = new TopK(limit)
  }

  run(): Array<{ label: number; score: number }> {
    for (;;) {
      const essential = this.m - this.first
      // Each returns false once its lists are exhausted, true when the essential lists changed.
      const more =
        essential === 1 ? this.one() : essential === 2 ? this.two() : essential === 3 ? this.three() : essential > 3 && this.many()
      if (!more) break
    }
    return this.heap.sorted()
  }

  /** One essential list. */
  private one(): boolean {
    const i = this.first
    const labels = this.labels[i]!
    const tfs = this.tfs[i]!
    const docs = this.docs[i]!
    const n = this.n[i]!
    const w = this.idf[i]!
    const { avgdl } = this
    let p = this.pos[i]!
    while (p < n) {
      const d = labels[p]!
      const tf = tfs[p]!
      const info = docs[p]!
      p++
      const norm = BM25_K1 * (1 - BM25_B + (BM25_B * (info >>> 2)) / avgdl)
      const s = (w * (tf * (BM25_K1 + 1))) / (tf + norm)
      const row = this.row(info, norm)
      if (row >= 0 && (s + this.rows![row + i]!) * SLACK < this.worst) continue
      this.ts[this.ref[i]!] = s
      this.pos[i] = p
      this.finish(d, i, norm, s, row)
      if (this.first !== i) return true
    }
    this.pos[i] = p
    return false
  }

  /** Two essential lists, merged. */
  private two(): boolean {
    const a = this.first
    const b = a + 1
    const la = this.labels[a]!
    const lb = this.labels[b]!
    const ta = this.tfs[a]!
    const tb = this.tfs[b]!
    const xa = this.docs[a]!
    const xb = this.docs[b]!
    const na = this.n[a]!
    const nb = this.n[b]!
    const wa = this.idf[a]!
    const wb = this.idf[b]!
    const ja = this.ref[a]!
    const jb = this.ref[b]!
    const { avgdl, ts } = this
    let pa = this.pos[a]!
    let pb = this.pos[b]!
    for (;;) {
      const da = pa < na ? la[pa]! : END
      const db = pb < nb ? lb[pb]! : END
      const d = da < db ? da : db
      if (d === END) break
      const info = da === d ? xa[pa]! : xb[pb]!
      const norm = BM25_K1 * (1 - BM25_B + (BM25_B * (info >>> 2)) / avgdl)
      let sa = 0
      let sb = 0
      if (da === d) {
        const tf = ta[pa++]!
        sa = (wa * (tf * (BM25_K1 + 1))) / (tf + norm)
      }
      if (db === d) {
        const tf = tb[pb++]!
        sb = (wb * (tf * (BM25_K1 + 1))) / (tf + norm)
      }
      const partial = sa + sb
      const row = this.row(info, norm)
      if (row >= 0 && (partial + this.rows![row + a]!) * SLACK < this.worst) continue
      ts[ja] = sa
      ts[jb] = sb
      this.pos[a] = pa
      this.pos[b] = pb
      this.finish(d, a, norm, partial, row)
      if (this.first !== a) return true
    }
    this.pos[a] = pa
    this.pos[b] = pb
    return false
  }

  /** Three essential lists, merged. */
  private three(): boolean {
    const a = this.first
    const [la, lb, lc] = [this.labels[a]!, this.labels[a + 1]!, this.labels[a + 2]!]
    const [ta, tb, tc] = [this.tfs[a]!, this.tfs[a + 1]!, this.tfs[a + 2]!]
    const [xa, xb, xc] = [this.docs[a]!, this.docs[a + 1]!, this.docs[a + 2]!]
    const [na, nb, nc] = [this.n[a]!, this.n[a + 1]!, this.n[a + 2]!]
    const [wa, wb, wc] = [this.idf[a]!, this.idf[a + 1]!, this.idf[a + 2]!]
    const { avgdl, ts, ref } = this
    let [pa, pb, pc] = [this.pos[a]!, this.pos[a + 1]!, this.pos[a + 2]!]
    for (;;) {
      const da = pa < na ? la[pa]! : END
      const db = pb < nb ? lb[pb]! : END
      const dc = pc < nc ? lc[pc]! : END
      const d = Math.min(da, db, dc)
      if (d === END) break
      const info = da === d ? xa[pa]! : db === d ? xb[pb]! : xc[pc]!
      const norm = BM25_K1 * (1 - BM25_B + (BM25_B * (info >>> 2)) / avgdl)
      let sa = 0
      let sb = 0
      let sc = 0
      if (da === d) {
        const tf = ta[pa++]!
        sa = (wa * (tf * (BM25_K1 + 1))) / (tf + norm)
      }
      if (db === d) {
        const tf = tb[pb++]!
        sb = (wb * (tf * (BM25_K1 + 1))) / (tf + norm)
      }
      if (dc === d) {
        const tf = tc[pc++]!
        sc = (wc * (tf * (BM25_K1 + 1))) / (tf + norm)
      }
      // The sum in the order many() takes it (the pruning tests' slack covers any order).
      const partial = sa + sb + sc
      const row = this.row(info, norm)
      if (row >= 0 && (partial + this.rows![row + a]!) * SLACK < this.worst) continue
      ts[ref[a]!] = sa
      ts[ref[a + 1]!] = sb
      ts[ref[a + 2]!] = sc
      this.pos[a] = pa
      this.pos[a + 1] = pb
      this.pos[a + 2] = pc
      this.finish(d, a, norm, partial, row)
      if (this.first !== a) return true
    }
    this.pos[a] = pa
    this.pos[a + 1] = pb
    this.pos[a + 2] = pc
    return false
  }

  /** Four essential lists or more. */
  private many(): boolean {
    const { m, labels, tfs, n, idf, ref, pos, ts, avgdl } = this
    const first = this.first
    for (;;) {
      // The next document, and an essential list that holds it.
      let d = END
      let e = first
      for (let i = first; i < m; i++) {
        const p = pos[i]!
        if (p < n[i]! && labels[i]![p]! < d) {
          d = labels[i]![p]!
          e = i
        }
      }
      if (d === END) return false
      const info = this.docs[e]![pos[e]!]!
      const norm = BM25_K1 * (1 - BM25_B + (BM25_B * (info >>> 2)) / avgdl)
      let partial = 0
      for (let i = first; i < m; i++) {
        const p = pos[i]!
        if (p < n[i]! && labels[i]![p] === d) {
          const tf = tfs[i]![p]!
          const s = (idf[i]! * (tf * (BM25_K1 + 1))) / (tf + norm)
          ts[ref[i]!] = s
          partial += s
          pos[i] = p + 1
        } else ts[ref[i]!] = 0
      }
      const row = this.row(info, norm)
      if (row >= 0 && (partial + this.rows![row + first]!) * SLACK < this.worst) continue
      this.finish(d, first, norm, partial, row)
      if (this.first !== first) return true
    }
  }

  /** The document's row of bounds once they can prune (the heap full, a list not essential), else -1. */
  private row(info: number, norm: number): number {
    const { rows } = this
    if (!rows || this.first === 0 || !this.heap.full) return -1
    const width = this.m + 1
    const row = info * width
    if (rows[row]! < 0) {
      // Level 0: every tf of the document is 1; level 1: at most 2; level 2: any (the list's largest).
      const level = info & 3
      rows[row] = 0
      for (let i = 0; i < this.m; i++) {
        const top = this.topTf[i]!
        const tf = level < 2 ? Math.min(level + 1, top) : top
        rows[row + i + 1] = (rows[row + i]! + this.idf[i]! * ((tf * (BM25_K1 + 1)) / (tf + norm))) * SLACK
      }
    }
    return row
  }

  /**
   * A document the essential lists `first`… bring, with their scores in `ts` and summed in
   * `partial`: the other lists are looked up, largest bound first, while it can still beat the
   * heap; if it can, it is offered.
   */
  private finish(d: number, first: number, norm: number, partial: number, row: number): void {
    const { labels, tfs, n, idf, ref, pos, ts, heap, rows, below } = this
    for (let i = first - 1; i >= 0; i--) {
      if (heap.full && (partial + (row >= 0 ? rows![row + i + 1]! : below[i + 1]!)) * SLACK < this.worst) return
      const list = labels[i]!
      const p = seek(list, n[i]!, pos[i]!, d)
      pos[i] = p
      if (p < n[i]! && list[p] === d) {
        const tf = tfs[i]![p]!
        const s = (idf[i]! * (tf * (BM25_K1 + 1))) / (tf + norm)
        ts[ref[i]!] = s
        partial += s
      } else ts[ref[i]!] = 0
    }
    if (heap.full && partial * SLACK < this.worst) return
    if (!this.live[d] || (this.accept && !this.accept(d))) return
    let score = 0
    for (let j = 0; j < this.m; j++) score += ts[j]!
    heap.offer(d, score)
    if (heap.full) {
      this.worst = heap.worst
      while (this.first < this.m && below[this.first + 1]! < this.worst) this.first++
    }
  }
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
