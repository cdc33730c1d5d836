import { invalidRequest } from '../core/errors.js'

/** Memory list cursors are opaque to clients: the label of the last entry of the previous page. */
export function encodeMemoryCursor(label: number): string {
  return Buffer.from(JSON.stringify({ m: label }), 'utf8').toString('base64url')
}

/** The label to continue after (-1 without a cursor); a cursor not issued here is `INVALID_REQUEST`. */
export function decodeMemoryCursor(cursor: string | undefined): number {
  if (cursor === undefined) return -1
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { m?: unknown }
    if (typeof v.m === 'number' && Number.isSafeInteger(v.m) && v.m >= 0) return v.m
  } catch {
    /* fall through */
  }
  throw invalidRequest('query/cursor', 'is not a cursor this server issued')
}

/** The page of `items` (already filtered, one more than `limit` when there is more) and its next cursor. */
export function memoryPage<T>(items: { label: number; entry: T }[], limit: number): { items: T[]; next_cursor: string | null } {
  const page = items.slice(0, limit)
  return { items: page.map((i) => i.entry), next_cursor: items.length > limit ? encodeMemoryCursor(page[page.length - 1]!.label) : null }
}
