import { invalidRequest } from '../core/errors.js'

/** List cursors are opaque to clients: the id of the last session of the previous page. */
export function encodeCursor(sessionId: string): string {
  return Buffer.from(JSON.stringify({ after: sessionId }), 'utf8').toString('base64url')
}

export function decodeCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { after?: unknown }
    if (typeof v.after === 'string' && v.after.length > 0 && v.after.length <= 64) return v.after
  } catch {
    /* fall through */
  }
  throw invalidRequest('query/cursor', 'is not a cursor this server issued')
}
