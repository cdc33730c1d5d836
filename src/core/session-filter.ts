import { invalidRequest } from './errors.js'
import type { SessionQuery } from './wire.js'

/** The filters of a session list beyond status, instants as stored (`Date#toISOString`, so they compare as strings). */
export interface SessionFilter {
  created_after?: string
  created_before?: string
  updated_after?: string
  updated_before?: string
  metadata?: Readonly<Record<string, string>>
}

const INSTANTS = ['created_after', 'created_before', 'updated_after', 'updated_before'] as const

/** The query with its instants in the stored form (any RFC 3339 offset is accepted); INVALID_REQUEST for one that is not a date. */
export function normalizeSessionQuery(q: SessionQuery): SessionQuery {
  const out = { ...q }
  for (const k of INSTANTS) {
    const v = q[k]
    if (v === undefined) continue
    const ms = Date.parse(v)
    if (!Number.isFinite(ms)) throw invalidRequest(`query/${k}`, 'must be an RFC 3339 date-time')
    out[k] = new Date(ms).toISOString()
  }
  return out
}

/** Whether the query filters on more than status (the stores then read each candidate's details). */
export function hasSessionFilter(q: SessionFilter): boolean {
  return INSTANTS.some((k) => q[k] !== undefined) || (q.metadata !== undefined && Object.keys(q.metadata).length > 0)
}

/** Whether a session matches the filter (instants as stored). */
export function matchesSession(
  s: { created_at: string; updated_at: string; metadata: Readonly<Record<string, string>> },
  q: SessionFilter,
): boolean {
  if (q.created_after !== undefined && s.created_at < q.created_after) return false
  if (q.created_before !== undefined && s.created_at >= q.created_before) return false
  if (q.updated_after !== undefined && s.updated_at < q.updated_after) return false
  if (q.updated_before !== undefined && s.updated_at >= q.updated_before) return false
  for (const [k, v] of Object.entries(q.metadata ?? {})) if (s.metadata[k] !== v) return false
  return true
}

/**
 * Sessions a store looks at for one filtered page, at most: past it the page ends early (maybe
 * empty) with a `next_cursor` to go on from, so a filter that matches little never makes one
 * request scan a whole tenant.
 */
export const FILTER_SCAN_BUDGET = 5_000
