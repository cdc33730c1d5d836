import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { SessionService } from '../../core/session-service.js'
import {
  MemoryAddedSchema,
  MemoryAddSchema,
  MemoryItemPageSchema,
  MemoryItemSchema,
  memoryPageParams,
  memorySearchParams,
  MemorySearchResultSchema,
} from '../../core/wire.js'
import { callContext } from '../http/call-context.js'
import { FILTER_NOTE, split, withMetadata } from './metadata-query.js'
import { errors, json, PostHeaders } from './route-schemas.js'

const MemoryIdParams = Type.Object({
  id: Type.String({ format: 'uuid', description: 'Memory entry id (as `POST /v1/memory` returned it).' }),
})
export function memoryRoutes(app: FastifyInstance, service: SessionService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.get(
    '/v1/memory/search',
    {
      schema: {
        operationId: 'searchMemory',
        tags: ['memory'],
        summary: "Search the tenant's semantic memory",
        description: `Hits carry the entry id and metadata.${FILTER_NOTE} The filter applies before ranking.`,
        querystring: withMetadata(memorySearchParams),
        response: { 200: json(MemorySearchResultSchema, 'Hits, best first.'), ...errors('MEMORY_STORE_DISABLED', 'SESSION_NOT_FOUND') },
      },
    },
    async (req) => service.searchMemory(split(req.query), callContext(req)),
  )

  r.post(
    '/v1/memory',
    {
      schema: {
        operationId: 'addMemory',
        tags: ['memory'],
        summary: 'Add entries to memory',
        headers: PostHeaders,
        body: MemoryAddSchema,
        response: {
          201: json(MemoryAddedSchema, 'Ids of the new entries.'),
          ...errors('MEMORY_STORE_DISABLED', 'SESSION_NOT_FOUND', 'IDEMPOTENCY_CONFLICT', 'PAYLOAD_TOO_LARGE', 'STORE_UNAVAILABLE'),
        },
      },
    },
    async (req, reply) => reply.code(201).send(await service.addMemory(req.body, callContext(req))),
  )

  r.get(
    '/v1/memory',
    {
      schema: {
        operationId: 'listMemory',
        tags: ['memory'],
        summary: "List the tenant's memory entries",
        description: `In insertion order (oldest first), a page at a time: pass \`next_cursor\` as \`cursor\`; entries added meanwhile come on later pages.${FILTER_NOTE}`,
        querystring: withMetadata(memoryPageParams),
        response: { 200: json(MemoryItemPageSchema, 'A page of entries.'), ...errors('MEMORY_STORE_DISABLED', 'SESSION_NOT_FOUND') },
      },
    },
    async (req) => service.listMemory(split(req.query), callContext(req)),
  )

  r.get(
    '/v1/memory/:id',
    {
      schema: {
        operationId: 'getMemory',
        tags: ['memory'],
        summary: 'Read one memory entry',
        params: MemoryIdParams,
        response: { 200: json(MemoryItemSchema, 'The entry.'), ...errors('MEMORY_STORE_DISABLED', 'MEMORY_NOT_FOUND') },
      },
    },
    async (req) => service.getMemory(req.params.id, callContext(req)),
  )

  r.delete(
    '/v1/memory/:id',
    {
      schema: {
        operationId: 'deleteMemory',
        tags: ['memory'],
        summary: 'Delete one memory entry (from search and every index)',
        params: MemoryIdParams,
        response: {
          204: Type.Null({ description: 'Deleted (no body).' }),
          ...errors('MEMORY_STORE_DISABLED', 'MEMORY_NOT_FOUND', 'STORE_UNAVAILABLE'),
        },
      },
    },
    async (req, reply) => {
      await service.deleteMemory(req.params.id, callContext(req))
      return reply.code(204).send(null)
    },
  )
}
