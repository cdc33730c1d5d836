/** The constant of reciprocal rank fusion (Cormack et al.): damps the weight of top ranks. */
export const RRF_K = 60

/**
 * Reciprocal rank fusion of ranked label lists: score = Σ 1 / (k + rank). Normalised to
 * 0..1, where 1 is a label ranked first in every list. Ties break by label for determinism.
 */
export function fuse(lists: ReadonlyArray<ReadonlyArray<number>>, limit: number, k = RRF_K): Array<{ label: number; score: number }> {
  const scores = new Map<number, number>()
  for (const list of lists) list.forEach((label, i) => scores.set(label, (scores.get(label) ?? 0) + 1 / (k + i + 1)))
  const best = lists.length / (k + 1)
  return [...scores].map(([label, s]) => ({ label, score: s / best })).sort((a, b) => b.score - a.score || a.label - b.label).slice(0, limit)
}
