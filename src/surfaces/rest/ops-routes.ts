import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import type { SessionService } from '../../core/session-service.js'
import { CapabilitiesSchema } from '../../core/wire.js'
import { json, problems } from './route-schemas.js'
import type { RestMetrics } from './rest-metrics.js'

const Health = Type.Object({ status: Type.String() })

export function opsRoutes(app: FastifyInstance, service: SessionService, metrics: RestMetrics): void {
  app.get(
    '/v1/capabilities',
    {
      schema: {
        operationId: 'capabilities',
        tags: ['ops'],
        summary: 'Capabilities, providers and version',
        response: { 200: json(CapabilitiesSchema, 'Capabilities.'), ...problems(['RATE_LIMITED', 'INTERNAL']) },
      },
    },
    async () => service.capabilities(),
  )

  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'healthz',
        tags: ['ops'],
        summary: 'Liveness',
        response: { 200: json(Health, 'Alive.'), ...problems(['INTERNAL']) },
      },
      config: { rateLimit: false },
    },
    async () => ({ status: 'ok' }),
  )

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'readyz',
        tags: ['ops'],
        summary: 'Readiness (503 while starting or shutting down)',
        response: { 200: json(Health, 'Ready.'), 503: json(Health, 'Not ready.'), ...problems(['INTERNAL']) },
      },
      config: { rateLimit: false },
    },
    async (_req, reply) => {
      const status = service.readiness()
      return status === 'ready' ? { status } : reply.code(503).send({ status })
    },
  )

  app.get(
    '/metrics',
    {
      schema: {
        operationId: 'metrics',
        tags: ['ops'],
        summary: 'Prometheus metrics',
        response: {
          200: Type.Unsafe({ description: 'Prometheus text format.', content: { 'text/plain': { schema: { type: 'string' } } } }),
          ...problems(['INTERNAL']),
        },
      },
      config: { rateLimit: false },
    },
    async (_req, reply) => reply.type(metrics.contentType).send(await metrics.text()),
  )
}
