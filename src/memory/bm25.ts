/** What BM25 needs from an index (in memory or in LMDB). */
export interface KeywordStats {
  /** Documents in the collection (the tenant's entries). */
  docs: number
  /** Sum of their lengths in tokens. */
  totalLength: number
}

export interface Posting {
  label: number
  tf: number
}

export interface KeywordSource {
  stats(): KeywordStats
  /** Every posting of a term. */
  postings(term: string): Iterable<Posting>
  /** A document's length in tokens. */
  length(label: number): number
}

export const BM25_K1 = 1.2
export const BM25_B = 0.75
const K1 = BM25_K1
const B = BM25_B

/**
 * Okapi BM25 over a keyword source; returns labels with scores, best first. Query terms
 * are counted once each (a repeated word does not dominate). The reference scorer (and the
 * brute-force store's): `KeywordIndex.top` must give exactly the same result, faster.
 */
export function bm25(
  source: KeywordSource,
  queryTerms: readonly string[],
  limit: number,
  accept?: (label: number) => boolean,
): Array<{ label: number; score: number }> {
  const { docs, totalLength } = source.stats()
  if (docs === 0) return []
  const avgdl = totalLength / docs
  const scores = new Map<number, number>()
  for (const term of new Set(queryTerms)) {
    const postings = [...source.postings(term)]
    if (postings.length === 0) continue
    const idf = Math.log(1 + (docs - postings.length + 0.5) / (postings.length + 0.5))
    for (const p of postings) {
      if (accept && !accept(p.label)) continue
      const dl = source.length(p.label)
      const s = (idf * (p.tf * (K1 + 1))) / (p.tf + K1 * (1 - B + (B * dl) / avgdl))
      scores.set(p.label, (scores.get(p.label) ?? 0) + s)
    }
  }
  return [...scores]
    .map(([label, score]) => ({ label, score }))
    .sort((a, b) => b.score - a.score || a.label - b.label)
    .slice(0, limit)
}

/** Term frequencies of a tokenised document. */
export function termFrequencies(tokens: readonly string[]): Map<string, number> {
  const tf = new Map<string, number>()
  for (const t of tokens) tf.set(t, (tf.get(t) ?? 0) + 1)
  return tf
}
