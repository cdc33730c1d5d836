/** The constant of reciprocal rank fusion (Cormack et al.): damps the weight of top ranks. */
export const RRF_K = 60

/**
 * Weighted reciprocal rank fusion of ranked label lists: score = Σ w / (k + rank). Normalised to
 * 0..1, where 1 is a label ranked first in every list. Ties break by label for determinism.
 */
export function fuse(lists: ReadonlyArray<ReadonlyArray<number>>, limit: number, k = RRF_K, weights: readonly number[] = lists.map(() => 1)): Array<{ label: number; score: number }> {
  const scores = new Map<number, number>()
  lists.forEach((list, j) => list.forEach((label, i) => scores.set(label, (scores.get(label) ?? 0) + (weights[j] ?? 1) / (k + i + 1))))
  const best = weights.reduce((a, w) => a + w, 0) / (k + 1)
  return [...scores].map(([label, s]) => ({ label, score: s / best })).sort((a, b) => b.score - a.score || a.label - b.label).slice(0, limit)
}
