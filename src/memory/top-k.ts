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

  /** Whether `k` pairs are kept: a new pair must then beat {@link worst} to enter. */
  get full(): boolean {
    return this.size === this.k
  }

  /** The score of the worst kept pair (meaningful once {@link full}). */
  get worst(): number {
    return this.scores[0]!
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
