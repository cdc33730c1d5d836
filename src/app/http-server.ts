import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import cors from '@fastify/cors'
import rateLimit from '@fastify/rate-limit'
import { fastifySSE } from '@fastify/sse'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import { consoleRoutes } from '../surfaces/console/console-routes.js'
import type { Logger as PinoLogger } from 'pino'
import { randomBytes } from 'node:crypto'
import { BurrowError } from '../core/errors.js'
import type { SessionService } from '../core/session-service.js'
import { restApi } from '../surfaces/rest/rest-api.js'
import { rpcHttpRoutes } from '../surfaces/rpc/index.js'
import { mcpHttpRoutes } from '../surfaces/mcp/index.js'
import { passThrough } from '../surfaces/rest/sse-frames.js'
import { clientErrorHandler, expectationHandler } from '../surfaces/rest/client-error.js'
import { frameworkErrors } from '../surfaces/rest/framework-errors.js'
import type { Config } from './config.js'
import type { Metrics } from './metrics.js'
import { VERSION } from './version.js'
import { REQUEST_SERIALIZERS } from './logger.js'
import { NO_TRACING, type Tracer } from '../core/tracing.js'
import { requestSpans } from '../surfaces/http/request-spans.js'

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

// Generated request ids: a random per-process prefix and a counter — unique across processes
// and restarts for log correlation, and far cheaper per request than a UUID.
const PROCESS_PREFIX = randomBytes(6).toString('base64url')
let requestCounter = 0
const nextRequestId = () => `${PROCESS_PREFIX}-${(++requestCounter).toString(36)}`

/** The fastify instance with every HTTP surface mounted. */
export async function buildHttpServer(
  config: Config,
  service: SessionService,
  metrics: Metrics,
  logger: PinoLogger,
  tracer: Tracer = NO_TRACING,
): Promise<FastifyInstance> {
  const app = Fastify({
    // Request URLs are logged with credentials (`?access_token=`) redacted, whatever logger is given.
    loggerInstance: logger.child({}, { serializers: REQUEST_SERIALIZERS }) as unknown as FastifyBaseLogger,
    bodyLimit: config.bodyLimitBytes,
    // What fastify and Node's parser refuse is answered as a problem document of the code table.
    frameworkErrors,
    clientErrorHandler: clientErrorHandler(nextRequestId),
    // The longest path parameter a route accepts is a note key (128 characters).
    routerOptions: { maxParamLength: 128 },
    // Connections are closed by the drain (http-drain.ts): `true` would destroy sockets whose answer is still being written.
    forceCloseConnections: false,
    requestIdHeader: false,
    logController: new LogController({ requestIdLogLabel: 'request_id' }),
    genReqId: (req) => {
      const h = req.headers['x-request-id']
      return typeof h === 'string' && REQUEST_ID.test(h) ? h : nextRequestId()
    },
  })
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('x-request-id', req.id)
    done()
  })
  // Before any route is added: each route's span hook is attached as the route is registered.
  requestSpans(app, tracer)
  app.server.on('checkExpectation', expectationHandler(app.log, nextRequestId))

  if (config.corsOrigins) {
    await app.register(cors, {
      origin: config.corsOrigins.includes('*') ? '*' : config.corsOrigins,
      methods: ['GET', 'POST', 'PUT', 'DELETE', 'OPTIONS'],
      allowedHeaders: [
        'authorization',
        'content-type',
        'idempotency-key',
        'last-event-id',
        'x-request-id',
        'mcp-protocol-version',
        'mcp-session-id',
        // W3C trace context, sent by browsers whose pages are traced (observability.md).
        'traceparent',
        'tracestate',
      ],
      exposedHeaders: ['x-request-id', 'location', 'retry-after', 'mcp-session-id'],
      maxAge: 600,
    })
  }
  if (config.rateLimitPerMinute) {
    await app.register(rateLimit, {
      max: config.rateLimitPerMinute,
      timeWindow: 60_000,
      keyGenerator: (req) => (typeof req.headers.authorization === 'string' ? `key:${req.headers.authorization}` : `ip:${req.ip}`),
      errorResponseBuilder: (_req, ctx) =>
        new BurrowError('RATE_LIMITED', `Too many requests: at most ${ctx.max} per minute; retry in ${Math.ceil(ctx.ttl / 1000)} s.`),
    })
  }
  await app.register(fastifySSE, { heartbeatInterval: config.sseHeartbeatMs, serializer: passThrough })
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Burrow',
        version: VERSION,
        description:
          'Durable LLM agent sessions: turns, compaction, semantic memory and Server-Sent Events. Errors are application/problem+json with a stable `code`.',
      },
      components: {
        securitySchemes: {
          bearer: {
            type: 'http',
            scheme: 'bearer',
            description:
              'An API key from BURROW_API_KEYS, or a short-lived token from POST /v1/tokens (SSE routes also take ?access_token=).',
          },
        },
      },
      security: [{ bearer: [] }],
      tags: [
        { name: 'sessions' },
        { name: 'turns' },
        { name: 'events' },
        { name: 'notes' },
        { name: 'memory' },
        { name: 'auth' },
        { name: 'ops' },
        { name: 'rpc' },
        { name: 'mcp' },
      ],
    },
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
  })
  await app.register(restApi, { service, metrics })
  rpcHttpRoutes(app, service)
  mcpHttpRoutes(app, service)
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { url: '/openapi.json' } })
  consoleRoutes(app)
  app.get(
    '/openapi.json',
    {
      schema: {
        operationId: 'openapi',
        tags: ['ops'],
        summary: 'This OpenAPI 3.1 document (viewer at /docs)',
        response: { 200: { description: 'The document.', content: { 'application/json': { schema: { type: 'object' } } } } },
      },
    },
    async () => app.swagger(),
  )
  return app
}
