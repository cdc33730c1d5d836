import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { BurrowError } from '../../core/errors.js'
import type { SessionService } from '../../core/session-service.js'
import { NoteKeySchema, NotePutSchema, NoteSchema, NotesSchema } from '../../core/wire.js'
import { callContext } from '../http/call-context.js'
import { errors, json, PostHeaders } from './route-schemas.js'

const NoteParams = Type.Object({ id: Type.String({ format: 'uuid' }), key: NoteKeySchema })
const SessionOnly = Type.Object({ id: Type.String({ format: 'uuid' }) })

export function noteRoutes(app: FastifyInstance, service: SessionService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.get(
    '/v1/sessions/:id/notes',
    {
      schema: {
        operationId: 'listNotes',
        tags: ['notes'],
        summary: 'Session notes, oldest first',
        params: SessionOnly,
        response: { 200: json(NotesSchema, 'The notes.'), ...errors('SESSION_NOT_FOUND') },
      },
    },
    async (req) => ({ notes: await service.listNotes(req.params.id, callContext(req)) }),
  )

  r.get(
    '/v1/sessions/:id/notes/:key',
    {
      schema: {
        operationId: 'getNote',
        tags: ['notes'],
        summary: 'One session note',
        params: NoteParams,
        response: { 200: json(NoteSchema, 'The note.'), ...errors('SESSION_NOT_FOUND', 'NOTE_NOT_FOUND') },
      },
    },
    async (req) => {
      const note = (await service.listNotes(req.params.id, callContext(req))).find((n) => n.key === req.params.key)
      if (!note) throw new BurrowError('NOTE_NOT_FOUND', `Session ${req.params.id} has no note '${req.params.key}'.`)
      return note
    },
  )

  r.put(
    '/v1/sessions/:id/notes/:key',
    {
      schema: {
        operationId: 'putNote',
        tags: ['notes'],
        summary: 'Set a session note (pinned into every LLM call; the oldest go past 200)',
        params: NoteParams,
        headers: PostHeaders,
        body: NotePutSchema,
        response: {
          200: json(NoteSchema, 'The note as stored.'),
          ...errors('SESSION_NOT_FOUND', 'SESSION_ARCHIVED', 'PAYLOAD_TOO_LARGE', 'STORE_UNAVAILABLE'),
        },
      },
    },
    async (req) => service.putNote(req.params.id, req.params.key, req.body.value, callContext(req)),
  )

  r.delete(
    '/v1/sessions/:id/notes/:key',
    {
      schema: {
        operationId: 'deleteNote',
        tags: ['notes'],
        summary: 'Delete a session note',
        params: NoteParams,
        response: {
          204: Type.Null({ description: 'Deleted (or there was no such note).' }),
          ...errors('SESSION_NOT_FOUND', 'SESSION_ARCHIVED', 'STORE_UNAVAILABLE'),
        },
      },
    },
    async (req, reply) => {
      await service.deleteNote(req.params.id, req.params.key, callContext(req))
      return reply.code(204).send(null)
    },
  )
}
