import type {} from '@fastify/sse'
import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { toBurrowError } from '../../core/errors.js'
import type { EventType } from '../../core/events.js'
import type { SessionService } from '../../core/session-service.js'
import {
  ArchiveResultSchema,
  CompactionResultSchema,
  CreateSessionSchema,
  InterruptResultSchema,
  SessionCreatedSchema,
  SessionPageSchema,
  sessionQueryParams,
  SessionViewSchema,
  StartTurnSchema,
  StreamFrameSchema,
  TurnResultSchema,
  UpdateSessionSchema,
  ForkSessionSchema,
} from '../../core/wire.js'
import { callContext } from '../http/call-context.js'
import { problemOf } from '../http/problem.js'
import { FILTER_NOTE, split, withMetadata } from './metadata-query.js'
import { errors, json, PostHeaders, SessionParams } from './route-schemas.js'
import { eventText, frameText } from './sse-frames.js'
import type { RestMetrics } from './rest-metrics.js'

/** The events a turn's stream ends with when the turn's end is stored. */
const TURN_ENDS = new Set<EventType>(['turn_completed', 'turn_failed', 'turn_requires_action'])

const TurnResponses = (extra: Parameters<typeof errors>) => ({
  200: Type.Unsafe({
    description: 'The turn result (JSON), or with `Accept: text/event-stream` the SSE stream of this turn.',
    content: { 'application/json': { schema: TurnResultSchema }, 'text/event-stream': { schema: StreamFrameSchema } },
  }),
  ...errors(...extra),
})

const TURN_ERRORS = [
  'SESSION_NOT_FOUND',
  'SESSION_BUSY',
  'SESSION_ARCHIVED',
  'IDEMPOTENCY_CONFLICT',
  'PAYLOAD_TOO_LARGE',
  'BUDGET_EXCEEDED',
  'PROVIDER_NOT_CONFIGURED',
  'PROVIDER_ERROR',
  'PROVIDER_TIMEOUT',
  'INTERRUPTED',
  'SHUTTING_DOWN',
  'STORE_UNAVAILABLE',
] as const

export function sessionRoutes(app: FastifyInstance, service: SessionService, metrics: RestMetrics): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.post(
    '/v1/sessions',
    {
      schema: {
        operationId: 'createSession',
        tags: ['sessions'],
        summary: 'Create a session',
        headers: PostHeaders,
        body: CreateSessionSchema,
        response: {
          201: json(SessionCreatedSchema, 'The session and its effective configuration.'),
          ...errors(
            'IDEMPOTENCY_CONFLICT',
            'PAYLOAD_TOO_LARGE',
            'PROVIDER_NOT_CONFIGURED',
            'SESSION_COMPACTION_DISABLED',
            'MEMORY_STORE_DISABLED',
            'SHUTTING_DOWN',
            'STORE_UNAVAILABLE',
          ),
        },
      },
      // An empty POST creates a session with every default.
      preValidation: async (req) => {
        if (req.body === undefined || req.body === null) req.body = {}
      },
    },
    async (req, reply) => {
      const created = await service.createSession(req.body, callContext(req))
      return reply.code(201).header('location', `/v1/sessions/${created.session_id}`).send(created)
    },
  )

  const turnHandler = (op: 'startTurn' | 'resume') => async (req: any, reply: any) => {
    const ctx = callContext(req)
    if (!reply.sse) return service[op](req.params.id, req.body, ctx)
    metrics.sseOpened()
    reply.sse.onClose(() => metrics.sseClosed())
    let ended = false
    // The turn's own events are bounded by the turn, so they are written without waiting on the reader.
    ctx.onEvent = (e) => {
      if (!reply.sse.isConnected) return
      reply.sse.sendHeaders()
      reply.raw.write(eventText(e))
      if (TURN_ENDS.has(e.type)) ended = true
    }
    ctx.onQueued = (position) => {
      if (!reply.sse.isConnected) return
      reply.sse.sendHeaders()
      reply.raw.write(frameText({ kind: 'control', control: { type: 'turn_queued', session_id: req.params.id, data: { position } } }))
    }
    try {
      await service[op](req.params.id, req.body, ctx)
    } catch (err) {
      if (!reply.raw.headersSent) throw err // refused before the turn began: a plain problem response
      // Cut off with no stored end (its events could not be stored — the store failed, or another replica
      // took the session over): the stream still ends saying why, with the JSON form's problem document.
      if (!ended && reply.sse.isConnected) {
        const problem = problemOf(toBurrowError(err), ctx.requestId)
        reply.raw.write(
          frameText({ kind: 'control', control: { type: 'stream_closed', session_id: req.params.id, data: { reason: 'error', problem } } }),
        )
      }
    }
  }

  r.post(
    '/v1/sessions/:id/turns',
    {
      sse: 'dual',
      schema: {
        operationId: 'startTurn',
        tags: ['turns'],
        summary: 'Run a turn (input) or continue a paused one (tool_results)',
        params: SessionParams,
        headers: PostHeaders,
        body: StartTurnSchema,
        response: TurnResponses([...TURN_ERRORS]),
      },
    },
    turnHandler('startTurn'),
  )

  r.post(
    '/v1/sessions/:id/resume',
    {
      sse: 'dual',
      schema: {
        operationId: 'resumeSession',
        tags: ['turns'],
        summary: 'Continue a persisted session (also after a restart)',
        params: SessionParams,
        headers: PostHeaders,
        body: StartTurnSchema,
        response: TurnResponses([...TURN_ERRORS, 'SESSION_PERSISTENCE_DISABLED']),
      },
    },
    turnHandler('resume'),
  )

  r.get(
    '/v1/sessions/:id',
    {
      schema: {
        operationId: 'readSession',
        tags: ['sessions'],
        summary: 'Read a session',
        params: SessionParams,
        response: { 200: json(SessionViewSchema, 'The session.'), ...errors('SESSION_NOT_FOUND', 'SESSION_PERSISTENCE_DISABLED') },
      },
    },
    async (req) => service.read(req.params.id, callContext(req)),
  )

  r.get(
    '/v1/sessions',
    {
      schema: {
        operationId: 'listSessions',
        tags: ['sessions'],
        summary: 'List sessions, newest first',
        description: `Filter by status, by creation or last-activity time, and by metadata.${FILTER_NOTE}`,
        querystring: withMetadata(sessionQueryParams),
        response: { 200: json(SessionPageSchema, 'A page of sessions.'), ...errors('SESSION_PERSISTENCE_DISABLED') },
      },
    },
    async (req) => service.list(split(req.query), callContext(req)),
  )

  r.post(
    '/v1/sessions/:id/fork',
    {
      schema: {
        operationId: 'forkSession',
        tags: ['sessions'],
        summary: "Fork a session: a new session whose history is this one's up to an event",
        description:
          'The source is untouched. The new session carries `forked_from`; a turn open at that point is closed in the fork ' +
          '(its pending tool calls answered as failed), so its history is valid and it takes its next turn. An empty body forks at the last event.',
        params: SessionParams,
        headers: PostHeaders,
        body: ForkSessionSchema,
        response: {
          201: json(SessionViewSchema, 'The new session.'),
          ...errors('SESSION_NOT_FOUND', 'IDEMPOTENCY_CONFLICT', 'SESSION_PERSISTENCE_DISABLED', 'SHUTTING_DOWN', 'STORE_UNAVAILABLE'),
        },
      },
      preValidation: async (req) => {
        if (req.body === undefined || req.body === null) req.body = {}
      },
    },
    async (req, reply) => {
      const fork = await service.forkSession(req.params.id, req.body, callContext(req))
      return reply.code(201).header('location', `/v1/sessions/${fork.session_id}`).send(fork)
    },
  )

  r.patch(
    '/v1/sessions/:id',
    {
      schema: {
        operationId: 'updateSession',
        tags: ['sessions'],
        summary: 'Change a session: metadata (merged), system prompt, tools, compaction settings',
        description:
          'Recorded as a `session_updated` event and effective from the next turn. Metadata can change at any time; ' +
          'the other settings only while no turn is open (else 409 SESSION_BUSY). Also accepts `application/merge-patch+json`.',
        params: SessionParams,
        headers: PostHeaders,
        body: UpdateSessionSchema,
        response: {
          200: json(SessionViewSchema, 'The session as it is now.'),
          ...errors(
            'SESSION_NOT_FOUND',
            'SESSION_BUSY',
            'SESSION_ARCHIVED',
            'SESSION_COMPACTION_DISABLED',
            'IDEMPOTENCY_CONFLICT',
            'PAYLOAD_TOO_LARGE',
            'SESSION_PERSISTENCE_DISABLED',
            'STORE_UNAVAILABLE',
          ),
        },
      },
    },
    async (req) => service.updateSession(req.params.id, req.body, callContext(req)),
  )

  r.post(
    '/v1/sessions/:id/archive',
    {
      schema: {
        operationId: 'archiveSession',
        tags: ['sessions'],
        summary: 'Archive a session (read-only afterwards)',
        params: SessionParams,
        headers: PostHeaders,
        response: {
          200: json(ArchiveResultSchema, 'Archived.'),
          ...errors('SESSION_NOT_FOUND', 'SESSION_BUSY', 'SESSION_PERSISTENCE_DISABLED', 'STORE_UNAVAILABLE'),
        },
      },
    },
    async (req) => {
      await service.archive(req.params.id, callContext(req))
      return { session_id: req.params.id, status: 'archived' as const }
    },
  )

  r.delete(
    '/v1/sessions/:id',
    {
      schema: {
        operationId: 'deleteSession',
        tags: ['sessions'],
        summary: 'Delete a session, its events, files and memories',
        params: SessionParams,
        response: {
          204: Type.Null({ description: 'Deleted (no body).' }),
          ...errors('SESSION_NOT_FOUND', 'SESSION_BUSY', 'SESSION_PERSISTENCE_DISABLED', 'STORE_UNAVAILABLE'),
        },
      },
    },
    async (req, reply) => {
      await service.delete(req.params.id, callContext(req))
      return reply.code(204).send(null)
    },
  )

  r.post(
    '/v1/sessions/:id/compact',
    {
      schema: {
        operationId: 'compactSession',
        tags: ['sessions'],
        summary: 'Compact the session history now',
        params: SessionParams,
        headers: PostHeaders,
        response: {
          200: json(CompactionResultSchema, 'The outcome.'),
          ...errors(
            'SESSION_NOT_FOUND',
            'SESSION_BUSY',
            'SESSION_ARCHIVED',
            'SESSION_COMPACTION_DISABLED',
            'PROVIDER_ERROR',
            'PROVIDER_TIMEOUT',
            'STORE_UNAVAILABLE',
          ),
        },
      },
    },
    async (req) => service.compact(req.params.id, callContext(req)),
  )

  r.post(
    '/v1/sessions/:id/interrupt',
    {
      schema: {
        operationId: 'interruptTurn',
        tags: ['turns'],
        summary: 'Cancel the running (or paused) turn',
        params: SessionParams,
        headers: PostHeaders,
        response: {
          200: json(InterruptResultSchema, 'Whether a turn was interrupted.'),
          ...errors('SESSION_NOT_FOUND', 'STORE_UNAVAILABLE'),
        },
      },
    },
    async (req) => service.interrupt(req.params.id, callContext(req)),
  )
}
