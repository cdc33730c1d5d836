import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { ERROR_TABLE, type ErrorCode } from '../../core/errors.js'
import type { SessionService } from '../../core/session-service.js'
import { discardBody, drainBound } from '../http/body-drain.js'
import { callContext } from '../http/call-context.js'
import { fromFastifyError, isJsonSyntaxError } from '../http/problem.js'
import { dispatch, parseError } from './rpc-dispatcher.js'
import { rpcError } from '../json-rpc-errors.js'

/** What HTTP may refuse before JSON-RPC sees the body; each answered with its table row's status. */
const REFUSALS: ErrorCode[] = ['INVALID_REQUEST', 'PAYLOAD_TOO_LARGE', 'RATE_LIMITED', 'INTERNAL']

const RpcRefusalSchema = Type.Object(
  {
    jsonrpc: Type.Literal('2.0'),
    id: Type.Null(),
    error: Type.Object({
      code: Type.Integer({ description: "The code table's JSON-RPC number." }),
      message: Type.String(),
      data: Type.Object({ code: Type.String({ description: 'The error code of the table.' }) }, { additionalProperties: true }),
    }),
  },
  { $id: 'JsonRpcRefusal', description: 'A JSON-RPC error with id null: HTTP refused the request before JSON-RPC read it.' },
)

function refusalResponses(): Record<number, unknown> {
  const out: Record<number, unknown> = {}
  for (const code of REFUSALS) {
    out[ERROR_TABLE[code].http] = Type.Unsafe({
      description:
        code === 'INTERNAL' ? 'An unexpected failure (logged with the request id).' : `Refused before JSON-RPC read the body: ${code}.`,
      content: { 'application/json': { schema: { $ref: 'JsonRpcRefusal#' } } },
    })
  }
  return out
}

/**
 * JSON-RPC 2.0 over HTTP: `POST /rpc`, a request or a batch; the answer is HTTP 200 with
 * the response(s) (errors included, as JSON-RPC has it), or 204 when only notifications came.
 *
 * What JSON-RPC itself answers — a body that is not JSON (-32700), a message that is not a
 * request (-32600), every method's error — comes with HTTP 200. What HTTP refuses before
 * JSON-RPC reads the body (a body over the limit, the rate limit, a content type that is not
 * JSON, prototype-poisoning keys) comes with its table row's HTTP status and JSON-RPC number,
 * so a client learns the same code whichever layer refused.
 */
export function rpcHttpRoutes(app: FastifyInstance, service: SessionService): void {
  const bound = drainBound(app.initialConfig.bodyLimit ?? 1024 * 1024)
  app.addSchema(RpcRefusalSchema)
  app.post(
    '/rpc',
    {
      schema: {
        operationId: 'jsonRpc',
        tags: ['rpc'],
        summary:
          'JSON-RPC 2.0 (single or batch): session/create, turn/start, session/resume, session/read, session/list, session/update, session/fork, session/archive, session/delete, session/compact, turn/interrupt, memory/search, memory/add, notes/*, capabilities/get, events/list_since',
        body: { description: 'A JSON-RPC 2.0 request or batch.' },
        response: {
          200: {
            description: 'The response(s); errors carry the code table’s number in error.code and the string code in error.data.code.',
            content: { 'application/json': { schema: {} } },
          },
          204: { type: 'null', description: 'Only notifications were sent.' },
          ...refusalResponses(),
        },
      },
      errorHandler: async (err, req, reply) => refuse(err, req, reply, bound),
    },
    async (req, reply) => {
      if (req.body === undefined) return parseError('Parse error: the body is empty.')
      const ctx = callContext(req)
      const out = await dispatch(service, req.body, { ctx: { apiKey: ctx.apiKey, requestId: ctx.requestId, trace: ctx.trace } })
      if (out === undefined) return reply.code(204).send(null)
      return out
    },
  )
}

async function refuse(err: unknown, req: FastifyRequest, reply: FastifyReply, bound: number): Promise<FastifyReply> {
  if (isJsonSyntaxError(err)) {
    req.log.info({ code: 'INVALID_REQUEST', detail: (err as Error).message }, 'request refused')
    return reply
      .code(200)
      .type('application/json')
      .send(parseError(`Parse error: ${(err as Error).message}`))
  }
  const e = fromFastifyError(err)
  if (e.code === 'INTERNAL') req.log.error({ err }, 'internal error')
  else req.log.info({ code: e.code, detail: e.message }, 'request refused')
  if (e.code === 'PAYLOAD_TOO_LARGE') await discardBody(req.raw, bound)
  return reply
    .code(e.status)
    .type('application/json')
    .send({ jsonrpc: '2.0', id: null, error: rpcError(e) })
}
