import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { parseTraceparent, type Span, type TraceContext, type Tracer } from '../../core/tracing.js'
import { fromFastifyError } from './problem.js'

// A request's span, for its handler's CallContext: a WeakMap rather than a property, so requests
// keep fastify's object shape, and nothing is looked up when tracing is off (no span is ever stored).
const spans = new WeakMap<FastifyRequest, Span>()
const failed = new WeakSet<FastifyRequest>()

/** The request's server span (tracing on), which the service's spans of this call are children of. */
export function requestTrace(req: FastifyRequest): TraceContext | undefined {
  return spans.get(req)?.context
}

/**
 * One server span per HTTP request, named by method and route template (`POST /v1/sessions/{id}/turns`,
 * the OpenTelemetry HTTP conventions' low-cardinality name), the child of the request's W3C
 * `traceparent` when it carries a valid one. Registered before the routes; adds no hook at all
 * when tracing is off. The status is ERROR for 5xx answers only (a 4xx is the client's error,
 * as the conventions say for server spans); every refusal carries its table code as `error.type`.
 */
export function requestSpans(app: FastifyInstance, tracer: Tracer): void {
  if (!tracer.enabled) return
  app.addHook('onRoute', (route) => {
    const template = route.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}')
    const start = (req: FastifyRequest, _reply: FastifyReply, done: () => void) => {
      const span = tracer.start(`${req.method} ${template}`, parseTraceparent(req.headers.traceparent, req.headers.tracestate), 'server')
      span.set('http.request.method', req.method)
      span.set('http.route', template)
      // The path only: a query string may carry a credential (`?access_token=`).
      span.set('url.path', req.url.split('?', 1)[0]!)
      span.set('burrow.request_id', req.id)
      spans.set(req, span)
      done()
    }
    const existing = route.onRequest
    route.onRequest = existing === undefined ? [start] : Array.isArray(existing) ? [start, ...existing] : [start, existing]
  })
  app.addHook('onError', (req, _reply, err, done) => {
    const span = spans.get(req)
    if (span) {
      const e = fromFastifyError(err)
      if (e.status >= 500) {
        span.fail(e.code, e.message)
        failed.add(req)
      } else span.set('error.type', e.code)
    }
    done()
  })
  app.addHook('onResponse', (req, reply, done) => {
    const span = spans.get(req)
    if (span) {
      span.set('http.response.status_code', reply.statusCode)
      if (reply.statusCode >= 500 && !failed.has(req)) span.fail(String(reply.statusCode))
      span.end()
      spans.delete(req)
    }
    done()
  })
  app.addHook('onRequestAbort', (req, done) => {
    const span = spans.get(req)
    if (span) {
      span.fail('ABORTED', 'the client closed the connection before the answer')
      span.end()
      spans.delete(req)
    }
    done()
  })
}
