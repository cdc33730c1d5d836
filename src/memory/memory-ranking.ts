import type { MemoryQuery } from '../core/memory-store.js'
import { fuse } from './rank-fusion.js'

/** How many candidates each signal contributes before fusion. */
export const CANDIDATES = 50

export interface Ranked { label: number; score: number }

/**
 * Combines the two signals for a query mode: vector similarity (cosine, 0..1), keyword
 * (BM25, normalised to the best hit) or both by reciprocal rank fusion.
 */
export function rank(mode: NonNullable<MemoryQuery['mode']>, vector: readonly Ranked[], keyword: readonly Ranked[], limit: number): Ranked[] {
  if (mode === 'vector') return vector.slice(0, limit).map((r) => ({ label: r.label, score: clamp(r.score) }))
  if (mode === 'keyword') {
    const top = keyword[0]?.score ?? 1
    return keyword.slice(0, limit).map((r) => ({ label: r.label, score: clamp(r.score / top) }))
  }
  return fuse([vector.map((r) => r.label), keyword.map((r) => r.label)], limit)
}

function clamp(x: number): number {
  return Math.min(1, Math.max(0, x))
}

export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!
  return s // unit vectors
}
