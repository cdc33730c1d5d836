import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { SessionService } from '../../core/session-service.js'
import { MemoryAddedSchema, MemoryAddSchema, MemorySearchQuerySchema, MemorySearchResultSchema } from '../../core/wire.js'
import { callContext } from './call-context.js'
import { errors, json, PostHeaders } from './route-schemas.js'

export function memoryRoutes(app: FastifyInstance, service: SessionService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.get('/v1/memory/search', {
    schema: {
      operationId: 'searchMemory', tags: ['memory'], summary: "Search the tenant's semantic memory", querystring: MemorySearchQuerySchema,
      response: { 200: json(MemorySearchResultSchema, 'Hits, best first.'), ...errors('MEMORY_STORE_DISABLED', 'SESSION_NOT_FOUND') },
    },
  }, async (req) => service.searchMemory(req.query, callContext(req)))

  r.post('/v1/memory', {
    schema: {
      operationId: 'addMemory', tags: ['memory'], summary: 'Add entries to memory', headers: PostHeaders, body: MemoryAddSchema,
      response: { 201: json(MemoryAddedSchema, 'Ids of the new entries.'), ...errors('MEMORY_STORE_DISABLED', 'SESSION_NOT_FOUND', 'PAYLOAD_TOO_LARGE', 'STORE_UNAVAILABLE') },
    },
  }, async (req, reply) => reply.code(201).send(await service.addMemory(req.body, callContext(req))))
}
