import type { MemoryQuery } from '../core/memory-store.js'
import type { KeywordSource } from './bm25.js'
import { exactTerms } from './text-features.js'
import { TopK } from './top-k.js'

/**
 * How many candidates each signal contributes before fusion (at least the query's limit).
 * 30 instead of 50 (issue 14): memory-recall's hybrid recall@5 and MRR@10 are unchanged, and
 * the keyword side's floor rises sooner with a smaller heap.
 */
export const CANDIDATES = 30

export interface Ranked {
  label: number
  score: number
}

/**
 * How a list's scores become 0..1 before they are weighed: relative to the list (`minmax`,
 * `max`, `dbsf`: mean ± 3 standard deviations), `absolute` — cosine as it is (already 0..1,
 * and comparable across queries), BM25 over the list's best — or by rank alone: `rank` gives
 * the candidate at 1-based rank r the share (c + 1) / (c + r) (reciprocal rank, 1 for the
 * first; c = `rankConstant`), which is weighted reciprocal-rank fusion scaled to 0..1.
 */
export type Normalisation = 'minmax' | 'max' | 'dbsf' | 'absolute' | 'rank'

/** A weighted sum of normalised scores; a candidate missing from a list scores 0 there. */
export interface FusionWeights {
  vector: number
  keyword: number
  normalisation: Normalisation
  /** `rank` only: the constant c of (c + 1) / (c + r) (default 1); the larger, the flatter. */
  rankConstant?: number
}

/**
 * The fusion per embedder family, chosen on the tuning half of the dialogue recall benchmark
 * (`bench/memory-recall.bench.ts`, six generated corpora, 1,788 queries; it prints the grid) and
 * reported on the held-out half (docs/benchmarks.md). The grid: every normalisation, and rank
 * with constants 1, 5, 10, 20 and 60, each at keyword weight 0..1 in steps of 0.05 (vector
 * weight 1 − that); the criterion: first the most query types where hybrid recall@5 is at least
 * the better single signal's, then the highest mean recall@5.
 *
 * Both families fuse by rank with constant 1: score fusion (every normalisation, at every
 * weight) left at least one type below keyword search alone with the hashed embedder — itself a
 * lexical signal, whose scores compared across lists mostly add noise — while a steep rank
 * fusion keeps each list's own order and lets a passage both lists put near the top win.
 * Equal-weight RRF with the customary constant 60 (the fusion before issue 14) is far flatter:
 * near-misses of both lists outrank one list's clear first.
 * - hashed: the grid's best is keyword weight 0.5, every type at or above both signals on the
 *   tuning half, as at every weight from 0.5 to 0.75; 0.55 is one tuning query behind on the
 *   mean and is taken because at equal weights a passage only the keywords find (a new fact on
 *   a new topic, the exact words asked for) merely ties with the vector's unrelated first.
 * - neural (use-lite; an endpoint's model, which the benchmark cannot run offline): the vector
 *   carries the paraphrases; no weight kept every type at or above both signals on the tuning
 *   half (speaker-attributed questions want the keywords, paraphrases the vector), and the grid's
 *   best, keyword weight 0.25, is reported as it falls on the held-out half.
 * Re-run the grid before changing them.
 */
export const FUSION_BY_EMBEDDER: Readonly<Record<'hashed' | 'neural', FusionWeights>> = {
  hashed: { vector: 0.45, keyword: 0.55, normalisation: 'rank', rankConstant: 1 },
  neural: { vector: 0.75, keyword: 0.25, normalisation: 'rank', rankConstant: 1 },
}

/** The default embedder's fusion (hashed). */
export const FUSION: FusionWeights = FUSION_BY_EMBEDDER.hashed

/** The fusion for an embedder, by its `id` (`hashed-…` or anything else: a neural model). */
export function fusionFor(embedderId: string): FusionWeights {
  return embedderId.startsWith('hashed-') ? FUSION_BY_EMBEDDER.hashed : FUSION_BY_EMBEDDER.neural
}

/**
 * Combines the two signals for a query mode: vector similarity (cosine, 0..1), keyword
 * (BM25, normalised to the best hit) or both by a weighted sum of normalised scores
 * (`weights`, `FUSION` by default), in 0..1. When the query names exact identifiers (ticket
 * ids, versions, hosts, commits, paths — see `exactTerms`), the passages that contain all of
 * them (`exact`) rank first in hybrid mode: look-alike ids are close in vector space, but only
 * the exact match answers the question. Ties break by label, so results are deterministic.
 * Labels are the stores' entry labels: integers from 0 (the heaps keep them as uint32).
 */
export function rank(
  mode: NonNullable<MemoryQuery['mode']>,
  vector: readonly Ranked[],
  keyword: readonly Ranked[],
  limit: number,
  exact?: ReadonlySet<number>,
  weights: FusionWeights = FUSION,
): Ranked[] {
  if (mode === 'vector') return vector.slice(0, limit).map((r) => ({ label: r.label, score: clamp(r.score) }))
  if (mode === 'keyword') {
    const top = keyword[0]?.score ?? 1
    return keyword.slice(0, limit).map((r) => ({ label: r.label, score: clamp(r.score / top) }))
  }
  // Only the best `limit` of each group are wanted: bounded heaps, not a sort of every candidate
  // (a comparator sort of 60 took ~8 µs here, on every hybrid search's critical path).
  const n = Math.max(0, limit)
  const best = new TopK(n)
  const exactBest = exact && exact.size > 0 ? new TopK(n) : undefined
  for (const r of fused(vector, keyword, weights)) (exactBest && exact!.has(r.label) ? exactBest : best).offer(r.label, r.score)
  if (!exactBest) return best.sorted()
  // Exact matches first, in fused order, with scores in (0.5, 1]; the rest after, in [0, 0.5].
  const first = exactBest.sorted().map((r) => ({ label: r.label, score: 0.5 + Math.max(r.score, 1e-9) / 2 }))
  const rest = best.sorted().map((r) => ({ label: r.label, score: r.score / 2 }))
  return [...first, ...rest].slice(0, n)
}

/** Every candidate of either list with Σ wᵢ·normᵢ / Σ wᵢ (0..1), best first, ties by label. */
export function fuseScores(vector: readonly Ranked[], keyword: readonly Ranked[], w: FusionWeights = FUSION): Ranked[] {
  return fused(vector, keyword, w).sort((a, b) => b.score - a.score || a.label - b.label)
}

/** {@link fuseScores} unsorted: plain loops, one object per candidate (on every hybrid search's critical path). */
function fused(vector: readonly Ranked[], keyword: readonly Ranked[], w: FusionWeights): Ranked[] {
  const total = w.vector + w.keyword || 1
  const c = w.rankConstant ?? 1
  const out: Ranked[] = []
  // Where each label is in `out`: a label in both lists is counted once per list.
  const at = new Map<number, number>()
  const add = (list: readonly Ranked[], weight: number, side: 'vector' | 'keyword') => {
    const norm = w.normalisation === 'rank' ? undefined : normaliser(list, w.normalisation, side)
    for (let i = 0; i < list.length; i++) {
      const r = list[i]!
      const share = norm ? norm(r.score) : (c + 1) / (c + i + 1)
      const s = (weight * share) / total
      const j = at.get(r.label)
      if (j === undefined) {
        at.set(r.label, out.length)
        out.push({ label: r.label, score: s })
      } else out[j]!.score += s
    }
  }
  add(vector, w.vector, 'vector')
  add(keyword, w.keyword, 'keyword')
  for (const r of out) r.score = clamp(r.score)
  return out
}

/**
 * The function mapping one list's scores to 0..1 (a list of one, or of equal scores, maps to 1).
 * `side` matters only to `absolute`: cosine is taken as it is, BM25 over the list's best.
 */
export function normaliser(
  list: readonly Ranked[],
  how: Exclude<Normalisation, 'rank'>,
  side: 'vector' | 'keyword' = 'vector',
): (s: number) => number {
  if (list.length === 0) return () => 0
  if (how === 'absolute') return side === 'vector' ? clamp : normaliser(list, 'max')
  let max = -Infinity
  let min = Infinity
  let sum = 0
  for (const r of list) {
    max = Math.max(max, r.score)
    min = Math.min(min, r.score)
    sum += r.score
  }
  if (how === 'max') return max > 0 ? (s) => clamp(s / max) : () => 1
  if (how === 'minmax') return max > min ? (s) => (s - min) / (max - min) : () => 1
  const mean = sum / list.length
  const sd = Math.sqrt(list.reduce((a, r) => a + (r.score - mean) ** 2, 0) / list.length)
  return sd > 0 ? (s) => clamp((s - (mean - 3 * sd)) / (6 * sd)) : () => 1
}

function clamp(x: number): number {
  return Math.min(1, Math.max(0, x))
}

export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!
  return s // unit vectors
}

/** Passages containing every term the query means literally (via their postings). */
export function exactMatches(source: KeywordSource, text: string): Set<number> | undefined {
  const ids = exactTerms(text)
  if (ids.length === 0) return undefined
  let labels: Set<number> | undefined
  for (const id of ids) {
    const has = new Set<number>()
    for (const p of source.postings(id)) if (!labels || labels.has(p.label)) has.add(p.label)
    labels = has
  }
  return labels
}
