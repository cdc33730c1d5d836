/**
 * MCP over streamable HTTP at `/mcp`, stateless: nothing is kept between requests, so
 * any instance can answer and no `initialize` is needed first. One MCP server per mount
 * serves every POST through HttpMuxTransport (see there: it keeps the SDK transport's
 * checks without its per-request cost). Responses are SSE streams (the MCP client accepts
 * both JSON and SSE), so a turn's progress notifications reach the client as they happen.
 *
 * Every HTTP request is authenticated first, by the service: with API keys configured, a
 * missing or wrong bearer key is HTTP 401 with `WWW-Authenticate` and a JSON-RPC error
 * (UNAUTHORIZED) before any MCP method runs — `initialize` and `tools/list` included. The key
 * also goes into each tool call's CallContext, where the service checks it again and scopes
 * the call to its tenant.
 *
 * What fails before MCP reads a message is a JSON-RPC error with id null under the HTTP
 * status of the one code table, with the table's number and `data.code` (-32700 only for a
 * body that is not JSON). GET and DELETE answer 405, as the MCP specification asks of a
 * server without a standalone stream or sessions (the SDK's client relies on it).
 *
 * Stateless means a client's `notifications/cancelled` cannot be told from another
 * client's: cancelling a tool call over HTTP does not stop its turn (it does over stdio).
 * A client that disconnects does not stop it either.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { BurrowError, toBurrowError } from '../../core/errors.js'
import type { SessionService } from '../../core/session-service.js'
import { requestTrace } from '../http/request-spans.js'
import { discardBody, drainBound } from '../http/body-drain.js'
import { bearerChallenge, callContext } from '../http/call-context.js'
import { fromFastifyError, isJsonSyntaxError } from '../http/problem.js'
import { JSON_RPC } from '../../core/protocol-numbers.js'
import { rpcError } from '../json-rpc-errors.js'
import { HttpMuxTransport, type Refusal } from './mcp-http-transport.js'
import { createMcpServer, toolCallOf } from './mcp-server.js'

export function mcpHttpRoutes(app: FastifyInstance, service: SessionService): void {
  const transport = new HttpMuxTransport()
  const server = createMcpServer(
    service,
    (extra) => transport.context(extra) ?? { apiKey: undefined, requestId: `mcp-${String(extra.requestId)}` },
    {
      logError: (err, requestId) => app.log.error({ err, reqId: requestId }, 'internal error in an MCP tool call'),
      version: service.capabilities().version,
      cancellation: false,
    },
  )
  transport.toolCall = toolCallOf(server)
  transport.onInternalError = (err) => app.log.error({ err }, 'internal error in an MCP request')
  let ready = false
  const connected = server.connect(transport).then(() => {
    ready = true
  })
  app.addHook('onClose', async () => {
    await server.close()
  })
  const bound = drainBound(app.initialConfig.bodyLimit ?? 1024 * 1024)

  // Before the body is read: an unauthenticated client gets nothing parsed, let alone run.
  const authenticate = (req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => {
    const { apiKey } = callContext(req)
    try {
      service.authenticate({ apiKey, requestId: req.id })
    } catch (err) {
      const e = toBurrowError(err)
      if (e.code === 'INTERNAL') {
        done(err as Error)
        return
      }
      req.log.info({ code: e.code, detail: e.message }, 'request refused')
      if (e.code === 'UNAUTHORIZED') reply.header('www-authenticate', bearerChallenge(apiKey !== undefined))
      answer(reply, e.status, rpcError(e))
      return
    }
    done()
  }

  app.post(
    '/mcp',
    {
      schema: { hide: true },
      onRequest: authenticate,
      errorHandler: async (err, req, reply) => {
        const e = fromFastifyError(err)
        if (e.code === 'INTERNAL') req.log.error({ err }, 'internal error')
        else req.log.info({ code: e.code, detail: e.message }, 'request refused')
        if (isJsonSyntaxError(err)) return answer(reply, e.status, rpcError(e, JSON_RPC.PARSE_ERROR))
        if (e.code === 'PAYLOAD_TOO_LARGE') await discardBody(req.raw, bound)
        return answer(reply, e.status, rpcError(e))
      },
    },
    async (req, reply) => {
      if (req.body === undefined) {
        return answer(
          reply,
          400,
          rpcError(new BurrowError('INVALID_REQUEST', 'Parse error: the body is empty.', { field: 'body' }), JSON_RPC.PARSE_ERROR),
        )
      }
      if (!ready) await connected
      const { apiKey } = callContext(req)
      const version = req.headers['mcp-protocol-version']
      // Headers set by hooks (x-request-id, CORS) go with the hijacked reply.
      const headers = reply.getHeaders() as Record<string, string | number | string[]> // a copy, ours to extend
      for (const name in headers) if (headers[name] === undefined) delete headers[name]
      reply.hijack()
      const refused = transport.handle(
        req.body,
        req.headers.accept,
        Array.isArray(version) ? version[0] : version,
        reply.raw,
        { apiKey, requestId: req.id, trace: requestTrace(req) },
        headers,
      )
      if (refused)
        reply.raw
          .writeHead(refused.status, { ...headers, 'content-type': 'application/json' })
          .end(JSON.stringify(envelope(refusalError(refused))))
    },
  )

  // Stateless: no server-initiated stream (GET) and no session to end (DELETE).
  const notAllowed = async (_req: FastifyRequest, reply: FastifyReply) =>
    answer(
      reply.header('allow', 'POST'),
      405,
      rpcError(new BurrowError('ROUTE_NOT_FOUND', 'Method not allowed: this MCP endpoint is stateless; use POST.')),
    )
  app.get('/mcp', { schema: { hide: true }, onRequest: authenticate }, notAllowed)
  app.delete('/mcp', { schema: { hide: true }, onRequest: authenticate }, notAllowed)
}

function refusalError(r: Refusal) {
  return { code: r.code, message: r.message, data: { code: r.burrowCode, ...(r.field ? { field: r.field } : {}) } }
}

function envelope(error: unknown) {
  return { jsonrpc: '2.0', id: null, error }
}

function answer(reply: FastifyReply, status: number, error: unknown): FastifyReply {
  return reply.code(status).type('application/json').send(envelope(error))
}
