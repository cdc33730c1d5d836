import { Type } from 'typebox'
import { invalidRequest } from '../../core/errors.js'
import { METADATA_FILTER_KEY, METADATA_FILTER_VALUE_MAX } from '../../core/wire.js'

// `metadata.KEY=VALUE` query parameters (memory search and listing, the session list): REST's form
// of the other surfaces' `metadata` object.

export const FILTER_NOTE =
  ' Filter by metadata with query parameters `metadata.KEY=VALUE` (every pair must match; keys `^[A-Za-z0-9_.:-]{1,64}$`, values up to 256 characters).'
/** The query's own parameters, plus any `metadata.KEY` (checked by metadataFilter). */
export const withMetadata = <P extends Record<string, any>>(props: P) =>
  Type.Object(props, { additionalProperties: false, patternProperties: { '^metadata\\.': Type.String() } })
const KEY = new RegExp(METADATA_FILTER_KEY)

/** The `metadata.KEY=VALUE` query parameters as a filter (undefined when there are none). */
export function metadataFilter(query: unknown): Record<string, string> | undefined {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(query as Record<string, unknown>)) {
    if (!name.startsWith('metadata.')) continue
    const key = name.slice('metadata.'.length)
    if (!KEY.test(key)) throw invalidRequest(`query/${name}`, `is not a metadata filter: keys match ${METADATA_FILTER_KEY}`)
    if (typeof value !== 'string' || value.length > METADATA_FILTER_VALUE_MAX)
      throw invalidRequest(`query/${name}`, `must be one value of at most ${METADATA_FILTER_VALUE_MAX} characters`)
    out[key] = value
  }
  return Object.keys(out).length > 0 ? out : undefined
}

/** The query without its `metadata.` parameters, plus the filter they make. */
export function split<Q extends Record<string, unknown>>(query: Q): Q & { metadata?: Record<string, string> } {
  const metadata = metadataFilter(query)
  const rest = Object.fromEntries(Object.entries(query).filter(([k]) => !k.startsWith('metadata.'))) as Q
  return metadata ? { ...rest, metadata } : rest
}
