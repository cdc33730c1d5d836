import { Type, type TSchema } from 'typebox'
import { ERROR_TABLE, type ErrorCode } from '../../core/errors.js'
import { StreamFrameSchema } from '../../core/wire.js'

export const ProblemRef = Type.Unsafe<Record<string, unknown>>({ $ref: 'Problem#' })

export const SessionParams = Type.Object({ id: Type.String({ format: 'uuid', description: 'Session id (UUIDv7).' }) })

export const PostHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({ minLength: 1, maxLength: 255, description: 'Retries with the same key and body return the first result.' }),
  ),
})

export const SseHeaders = Type.Object({
  'last-event-id': Type.Optional(Type.String({ pattern: '^\\d{1,15}$', description: 'Resume after this seq.' })),
})

export const SseQuery = Type.Object({
  after: Type.Optional(Type.Integer({ minimum: 0, description: 'Replay events with a seq greater than this, then tail.' })),
  access_token: Type.Optional(
    Type.String({ description: 'A token from POST /v1/tokens (or an API key), for clients (EventSource) that cannot send headers.' }),
  ),
})

/**
 * Error responses an API route can give (besides the ones every API route can), each a problem
 * document. Every API route may answer STORE_UNAVAILABLE: with a store across the network
 * (PostgreSQL), loading a session or reading a list can find the database gone; and FORBIDDEN,
 * to a token whose scope does not cover it.
 */
export function errors(...codes: ErrorCode[]): Record<number, TSchema> {
  return problems(['INVALID_REQUEST', 'UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMITED', 'INTERNAL', 'STORE_UNAVAILABLE', ...codes])
}

/** Exactly these error responses. */
export function problems(codes: ErrorCode[]): Record<number, TSchema> {
  const out: Record<number, TSchema> = {}
  const byStatus = new Map<number, ErrorCode[]>()
  for (const c of new Set<ErrorCode>(codes)) {
    const s = ERROR_TABLE[c].http
    byStatus.set(s, [...(byStatus.get(s) ?? []), c])
  }
  for (const [status, cs] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    out[status] = Type.Unsafe({
      description: `Problem: ${cs.join(', ')}`,
      content: { 'application/problem+json': { schema: { $ref: 'Problem#' } } },
    })
  }
  return out
}

export function json(schema: TSchema, description: string): TSchema {
  return Type.Unsafe({ description, content: { 'application/json': { schema } } })
}

export const SseResponse = Type.Unsafe({
  description:
    'Server-Sent Events: `id:` is the seq, `event:` the type, `data:` the envelope JSON. Text deltas and control frames (stream_truncated, stream_closed) carry no id.',
  content: { 'text/event-stream': { schema: StreamFrameSchema } },
})
