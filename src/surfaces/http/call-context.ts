import type { FastifyRequest } from 'fastify'
import type { CallContext } from '../../core/session-service.js'
import { requestTrace } from './request-spans.js'

/**
 * Builds the service's CallContext from a request. The service authenticates the key;
 * SSE routes also accept `?access_token=` because browsers' EventSource sends no headers.
 */
export function callContext(req: FastifyRequest, opts: { queryToken?: boolean } = {}): CallContext {
  let apiKey: string | undefined
  const auth = req.headers.authorization
  if (typeof auth === 'string' && auth.length > 0) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth)
    apiKey = m ? m[1] : ''
  } else if (opts.queryToken) {
    const q = req.query as { access_token?: unknown } | undefined
    if (typeof q?.access_token === 'string') apiKey = q.access_token
  }
  const key = req.headers['idempotency-key']
  return {
    apiKey,
    requestId: req.id,
    idempotencyKey: typeof key === 'string' && key.length > 0 ? key : undefined,
    trace: requestTrace(req),
  }
}

/**
 * The `WWW-Authenticate` challenge of a 401 (RFC 6750): `error="invalid_token"` when a
 * credential was presented and refused, none when there was none.
 */
export function bearerChallenge(presented: boolean): string {
  return presented ? 'Bearer realm="burrow", error="invalid_token"' : 'Bearer realm="burrow"'
}
