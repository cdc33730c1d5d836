import type { MemoryQuery } from '../core/memory-store.js'
import type { KeywordSource } from './bm25.js'
import { fuse } from './rank-fusion.js'
import { exactTerms } from './text-features.js'

/**
 * How many candidates each signal contributes before fusion (at least the query's limit).
 * 30 instead of 50 (issue 14): memory-recall's hybrid recall@5 and MRR@10 are unchanged, and
 * the keyword side's floor rises sooner with a smaller heap.
 */
export const CANDIDATES = 30

export interface Ranked { label: number; score: number }

/**
 * Combines the two signals for a query mode: vector similarity (cosine, 0..1), keyword
 * (BM25, normalised to the best hit) or both by reciprocal rank fusion. When the query
 * names exact identifiers (ticket ids, versions, hosts…), the passages that contain all of
 * them (`exact`) rank first in hybrid mode: look-alike ids are close in vector space, but
 * only the exact match answers the question.
 */
export function rank(mode: NonNullable<MemoryQuery['mode']>, vector: readonly Ranked[], keyword: readonly Ranked[], limit: number, exact?: ReadonlySet<number>): Ranked[] {
  if (mode === 'vector') return vector.slice(0, limit).map((r) => ({ label: r.label, score: clamp(r.score) }))
  if (mode === 'keyword') {
    const top = keyword[0]?.score ?? 1
    return keyword.slice(0, limit).map((r) => ({ label: r.label, score: clamp(r.score / top) }))
  }
  const fused = fuse([vector.map((r) => r.label), keyword.map((r) => r.label)], Math.max(limit, CANDIDATES))
  if (!exact || exact.size === 0) return fused.slice(0, limit)
  // Exact matches first, in keyword order (BM25 weighs where and how often the ids occur),
  // with scores in (0.5, 1]; the rest after, fused, in [0, 0.5].
  const top = keyword[0]?.score ?? 1
  const first = keyword.filter((r) => exact.has(r.label)).map((r) => ({ label: r.label, score: 0.5 + clamp(r.score / top) / 2 }))
  const rest = fused.filter((r) => !exact.has(r.label)).map((r) => ({ label: r.label, score: r.score / 2 }))
  return [...first, ...rest].slice(0, limit)
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

