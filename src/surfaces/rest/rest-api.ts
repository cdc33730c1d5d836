import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import type { SessionService } from '../../core/session-service.js'
import { BurrowError } from '../../core/errors.js'
import { ProblemSchema } from '../../core/wire.js'
import { assertJsonDepth } from '../json-depth.js'
import { requestAjv } from '../request-validation.js'
import { discardBody, drainBound } from '../http/body-drain.js'
import { bearerChallenge, callContext } from '../http/call-context.js'
import { eventRoutes } from './event-routes.js'
import { memoryRoutes } from './memory-routes.js'
import { noteRoutes } from './note-routes.js'
import { opsRoutes } from './ops-routes.js'
import { fromFastifyError, jsonSyntaxError, problemOf } from '../http/problem.js'
import { sessionRoutes } from './session-routes.js'
import { tokenRoutes } from './token-routes.js'
import type { RestMetrics } from './rest-metrics.js'

export type { RestMetrics } from './rest-metrics.js'

export interface RestApiOptions {
  service: SessionService
  metrics: RestMetrics
}

/**
 * The REST + SSE surface (docs/api.md): a thin adapter that parses, calls the one
 * SessionService, and maps BurrowError codes through the one table.
 */
const restApiPlugin: FastifyPluginAsync<RestApiOptions> = async (app: FastifyInstance, opts) => {
  const { service, metrics } = opts
  // Bodies are validated strictly: unknown properties are an error (never stripped) and types are
  // never coerced. Query strings, params and headers are text on the wire, so those may be ("5" → 5).
  const ajv = { body: requestAjv({ coerceTypes: false }), other: requestAjv({ coerceTypes: true }) }
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? ajv.body : ajv.other).compile(schema))
  // Responses are written as given; the schemas document them and tests validate them against the OpenAPI file.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data))
  app.addSchema({ ...ProblemSchema, $id: 'Problem', description: 'RFC 9457 problem details with the stable error `code`.' })

  // Only JSON is accepted; an empty JSON body reads as no body (so `curl -X POST -H 'content-type: application/json'` works).
  // JSON.parse tells a body that is not JSON (reported as such: JSON-RPC's -32700) from one that
  // is; fastify's parser then refuses prototype poisoning (`__proto__`, `constructor.prototype`).
  const parseJson = app.getDefaultJsonParser('error', 'error')
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    const text = body as string
    if (text.length === 0 || (text.length < 64 && text.trim() === '')) {
      done(null, undefined)
      return
    }
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch (err) {
      done(jsonSyntaxError(err), undefined)
      return
    }
    if (!POISON_HINT.test(text)) {
      done(null, value)
      return
    }
    parseJson(req, text, (err) => {
      if (err)
        done(
          new BurrowError('INVALID_REQUEST', 'The body must not have __proto__ or constructor.prototype keys.', { field: 'body' }),
          undefined,
        )
      else done(null, value)
    })
  })

  const bound = drainBound(app.initialConfig.bodyLimit ?? 1024 * 1024)
  app.setErrorHandler(async (err, req, reply) => {
    const e = fromFastifyError(err)
    if (e.code === 'INTERNAL') req.log.error({ err }, 'internal error')
    else req.log.info({ code: e.code, detail: e.message }, 'request refused')
    if (reply.raw.headersSent) {
      reply.raw.end()
      return
    }
    if (e.code === 'PAYLOAD_TOO_LARGE') await discardBody(req.raw, bound)
    if (e.code === 'UNAUTHORIZED')
      reply.header('www-authenticate', bearerChallenge(callContext(req, { queryToken: true }).apiKey !== undefined))
    if (e.code === 'FORBIDDEN') reply.header('www-authenticate', 'Bearer realm="burrow", error="insufficient_scope"')
    return reply.code(e.status).type('application/problem+json').send(problemOf(e, req.id))
  })

  // PATCH /v1/sessions/{id} is a JSON merge patch (RFC 7396): its media type is JSON too.
  app.addContentTypeParser('application/merge-patch+json', { parseAs: 'string' }, app.getDefaultJsonParser('error', 'error'))

  app.setNotFoundHandler((req, reply) => {
    const e = new BurrowError('ROUTE_NOT_FOUND', `No route ${req.method} ${req.url.split('?')[0]}.`)
    return reply.code(e.status).type('application/problem+json').send(problemOf(e, req.id))
  })

  // Request metrics, labelled by route template. The template is captured when each route is
  // registered (req.routeOptions builds a fresh object on every access, too slow per request).
  app.addHook('onRoute', (route) => {
    const url = route.url
    const body = (route.schema as { body?: Record<string, unknown> } | undefined)?.body
    // Routes with a body schema bound the depth of its free-form parts before validation reads
    // them (/rpc and /mcp check each message themselves, against each method's schema).
    if (body && (body.type !== undefined || body.anyOf !== undefined)) {
      const depth = (req: { body: unknown }, _reply: unknown, done: (err?: Error) => void) => {
        try {
          assertJsonDepth(req.body, body, 'body')
        } catch (err) {
          done(err as Error)
          return
        }
        done()
      }
      const existing = route.preValidation
      route.preValidation = existing === undefined ? [depth] : Array.isArray(existing) ? [depth, ...existing] : [depth, existing]
    }
    const observe = (req: { method: string }, reply: { statusCode: number; elapsedTime: number }, done: () => void) => {
      metrics.observeHttp(req.method, url, reply.statusCode, reply.elapsedTime / 1000)
      done()
    }
    const existing = route.onResponse
    route.onResponse = existing === undefined ? [observe] : Array.isArray(existing) ? [...existing, observe] : [existing, observe]
  })
  app.addHook('onResponse', (req, reply, done) => {
    if (reply.statusCode === 404 && !req.routeOptions.url) metrics.observeHttp(req.method, 'unmatched', 404, reply.elapsedTime / 1000)
    done()
  })

  sessionRoutes(app, service, metrics)
  eventRoutes(app, service, metrics)
  memoryRoutes(app, service)
  noteRoutes(app, service)
  tokenRoutes(app, service)
  opsRoutes(app, service, metrics)
}

// Only bodies that spell out one of the keys, or escape an ASCII character (which may spell
// one), can be poisoned: the others skip the second parse.
const POISON_HINT = /__proto__|constructor|\\u00[0-7]/

/** Registered without encapsulation: its validation, serialization and error mapping apply to every route of the app. */
export const restApi = fp(restApiPlugin, { name: 'burrow-rest', fastify: '5.x' })
