import type {} from '@fastify/sse'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { BurrowError, invalidRequest } from '../../core/errors.js'
import type { EventSubscription, SessionService } from '../../core/session-service.js'
import { callContext } from '../http/call-context.js'
import { errors, json, SessionParams, SseHeaders, SseQuery, SseResponse } from './route-schemas.js'
import { EventPageQuerySchema, EventPageSchema } from '../../core/wire.js'
import { frameText } from './sse-frames.js'
import { problemOf } from '../http/problem.js'
import type { RestMetrics } from './rest-metrics.js'

/** How long a dropped (slow) reader gets to take its final frame before its socket is destroyed. */
const DROP_GRACE_MS = 5_000

export function eventRoutes(app: FastifyInstance, service: SessionService, metrics: RestMetrics): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.get(
    '/v1/sessions/:id/events',
    {
      sse: 'only',
      schema: {
        operationId: 'sessionEvents',
        tags: ['events'],
        summary: "Replay and tail a session's events (SSE)",
        params: SessionParams,
        headers: SseHeaders,
        querystring: SseQuery,
        response: { 200: SseResponse, ...errors('SESSION_NOT_FOUND', 'SHUTTING_DOWN') },
      },
      onSend: notAcceptable,
    },
    async (req, reply) => {
      const after = resumePoint(req.query.after, req.headers['last-event-id'])
      const sub = await service.subscribe(req.params.id, { after }, callContext(req, { queryToken: true }))
      await pump(reply, sub, metrics)
    },
  )

  r.get(
    '/v1/sessions/:id/event-log',
    {
      schema: {
        operationId: 'listEvents',
        tags: ['events'],
        summary: "A page of a session's stored events (JSON; the SSE route tails them)",
        params: SessionParams,
        querystring: EventPageQuerySchema,
        response: { 200: json(EventPageSchema, 'Events with seq > after, in order.'), ...errors('SESSION_NOT_FOUND') },
      },
    },
    async (req) => service.listEvents(req.params.id, { after: req.query.after ?? 0, limit: req.query.limit ?? 100 }, callContext(req)),
  )

  r.get(
    '/v1/events',
    {
      sse: 'only',
      schema: {
        operationId: 'tenantEvents',
        tags: ['events'],
        summary: "Every session's events for the caller's tenant, live (SSE)",
        headers: SseHeaders,
        querystring: SseQuery,
        response: { 200: SseResponse, ...errors('SHUTTING_DOWN') },
      },
      onSend: notAcceptable,
    },
    async (req, reply) => {
      const after = resumePoint(req.query.after, req.headers['last-event-id'])
      const sub = await service.subscribe(null, { after }, callContext(req, { queryToken: true }))
      await pump(reply, sub, metrics)
    },
  )
}

/**
 * @fastify/sse answers a client whose Accept refuses text/event-stream with a 406 of its own
 * JSON; 406 is not in the code table, so it goes out as INVALID_REQUEST naming the header.
 */
async function notAcceptable(req: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
  if (reply.statusCode !== 406) return payload
  const e = new BurrowError('INVALID_REQUEST', 'This route streams Server-Sent Events: Accept must allow text/event-stream.', {
    field: 'header/accept',
  })
  reply.code(e.status).type('application/problem+json')
  return JSON.stringify(problemOf(e, req.id))
}

/**
 * Where a replay starts. Last-Event-ID wins over `?after=`: a reconnecting EventSource
 * keeps its original URL (with its original `after`) and adds the header.
 */
function resumePoint(after: number | undefined, lastEventId: string | undefined): number | undefined {
  if (lastEventId !== undefined) {
    const n = Number(lastEventId)
    if (!Number.isSafeInteger(n) || n < 0) throw invalidRequest('header/last-event-id', 'must be a non-negative integer')
    return n
  }
  return after
}

/**
 * Writes a subscription to the response in push mode: each ready batch in one write as
 * soon as it is ready; when the socket is full, delivery pauses until it drains (the
 * subscription's bounded queue absorbs bursts meanwhile, and drops a reader that stalls).
 */
async function pump(reply: FastifyReply, sub: EventSubscription, metrics: RestMetrics): Promise<void> {
  const sse = reply.sse!
  const raw = reply.raw
  metrics.sseOpened()
  sse.onClose(() => {
    sub.close()
    metrics.sseClosed()
  })
  // Ended by the service: the final frame is queued; a reader that does not take it in time is cut off.
  sub.onEnd(() => {
    setTimeout(() => raw.destroy(), DROP_GRACE_MS).unref()
  })
  sse.sendHeaders()
  // Tell EventSource to reconnect after 1 s (browsers default to ~3 s); it resends Last-Event-ID.
  raw.write(': connected\nretry: 1000\n\n')
  await new Promise<void>((resolve) => {
    const flow = sub.attach((batch) => {
      if (!sse.isConnected) return true
      let text = ''
      for (const f of batch) text += frameText(f)
      return raw.write(text)
    }, resolve)
    raw.on('drain', () => flow.resume())
  })
}
