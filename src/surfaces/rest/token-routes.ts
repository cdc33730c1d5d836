import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { SessionService } from '../../core/session-service.js'
import { AccessTokenSchema, TokenRequestSchema } from '../../core/wire.js'
import { callContext } from '../http/call-context.js'
import { errors, json } from './route-schemas.js'

export function tokenRoutes(app: FastifyInstance, service: SessionService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.post(
    '/v1/tokens',
    {
      schema: {
        operationId: 'createToken',
        tags: ['auth'],
        summary: 'A short-lived, scoped bearer token for a browser (never wider than the credential that asks)',
        description:
          'Exchange an API key (or refresh a token) for a token that expires: read-only or read-write, optionally limited to one session. ' +
          'REST routes take it as `Authorization: Bearer`, SSE routes also as `?access_token=`. A token mints tokens no wider than itself, ' +
          'expiring by its `refresh_until` (12 hours after the key was exchanged).',
        body: TokenRequestSchema,
        response: { 200: json(AccessTokenSchema, 'The token.'), ...errors('SESSION_NOT_FOUND') },
      },
    },
    async (req, reply) => {
      const token = await service.createToken(req.body, callContext(req))
      // A credential: never cached by the browser or a proxy (RFC 6749 §5.1).
      return reply.header('cache-control', 'no-store').send(token)
    },
  )
}
