import type { FastifyInstance } from 'fastify'
import type { SessionService } from '../../core/session-service.js'
import { callContext } from '../rest/call-context.js'
import { dispatch } from './rpc-dispatcher.js'

/**
 * JSON-RPC 2.0 over HTTP: `POST /rpc`, a request or a batch; the answer is HTTP 200 with
 * the response(s) (errors included, as JSON-RPC has it), or 204 when only notifications came.
 */
export function rpcHttpRoutes(app: FastifyInstance, service: SessionService): void {
  app.post('/rpc', {
    schema: {
      operationId: 'jsonRpc', tags: ['rpc'],
      summary: 'JSON-RPC 2.0 (single or batch): session/create, turn/start, session/resume, session/read, session/list, session/archive, session/delete, session/compact, turn/interrupt, memory/search, memory/add, notes/*, capabilities/get, events/list_since',
      body: { description: 'A JSON-RPC 2.0 request or batch.' },
      response: {
        200: { description: 'The response(s); errors carry the code table’s number in error.code and the string code in error.data.code.', content: { 'application/json': { schema: {} } } },
        204: { type: 'null', description: 'Only notifications were sent.' },
      },
    },
    // A malformed JSON body is answered as JSON-RPC's parse error rather than a problem document.
    errorHandler: (err, req, reply) => {
      reply.code(200).send({ jsonrpc: '2.0', id: null, error: { code: -32700, message: `Parse error: ${err.message}`, data: { code: 'INVALID_REQUEST' } } })
    },
  }, async (req, reply) => {
    const ctx = callContext(req)
    const out = await dispatch(service, req.body ?? null, { ctx: { apiKey: ctx.apiKey, requestId: ctx.requestId } })
    if (out === undefined) return reply.code(204).send(null)
    return out
  })
}
