/**
 * MCP over streamable HTTP at `/mcp`, stateless: nothing is kept between requests, so
 * any instance can answer and no `initialize` is needed first. One McpServer per mount
 * serves every POST through HttpMuxTransport (see there: it keeps the SDK transport's
 * checks without its per-request cost). Responses are SSE streams (the MCP client accepts
 * both JSON and SSE), so a turn's progress notifications reach the client as they happen.
 * The bearer key goes into each tool call's CallContext; the service authenticates it, so
 * a missing or bad key is an `UNAUTHORIZED` tool error.
 *
 * Stateless means a client's `notifications/cancelled` cannot be told from another
 * client's: cancelling a tool call over HTTP does not stop its turn (it does over stdio).
 * A client that disconnects does not stop it either.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { ERROR_TABLE } from '../../core/errors.js'
import type { SessionService } from '../../core/session-service.js'
import { callContext } from '../rest/call-context.js'
import { fromFastifyError } from '../rest/problem.js'
import { HttpMuxTransport } from './mcp-http-transport.js'
import { createMcpServer, toolCallOf } from './mcp-server.js'

export function mcpHttpRoutes(app: FastifyInstance, service: SessionService): void {
  const transport = new HttpMuxTransport()
  const server = createMcpServer(service, (extra) => transport.context(extra) ?? { apiKey: undefined, requestId: `mcp-${String(extra.requestId)}` }, {
    logError: (err, requestId) => app.log.error({ err, reqId: requestId }, 'internal error in an MCP tool call'),
    version: service.capabilities().version,
    cancellation: false,
  })
  transport.toolCall = toolCallOf(server)
  let ready = false
  const connected = server.connect(transport).then(() => { ready = true })
  app.addHook('onClose', async () => { await server.close() })

  app.post('/mcp', {
    schema: { hide: true },
    // What fails before MCP sees the request (bad JSON, body limit, rate limit) is answered as a
    // JSON-RPC error (a parse error for a bad body), with the HTTP status of the one code table.
    errorHandler: (err, req, reply) => {
      const e = fromFastifyError(err)
      if (e.code === 'INTERNAL') req.log.error({ err }, 'internal error')
      const code = e.code === 'INVALID_REQUEST' ? -32700 : ERROR_TABLE[e.code].rpc
      const message = e.code === 'INTERNAL' ? ERROR_TABLE.INTERNAL.message : e.message
      return reply.code(e.status).send({ jsonrpc: '2.0', id: null, error: { code, message, data: { code: e.code } } })
    },
  }, async (req, reply) => {
    if (!ready) await connected
    const { apiKey } = callContext(req)
    const version = req.headers['mcp-protocol-version']
    // Headers set by hooks (x-request-id, CORS) go with the hijacked reply.
    const headers = reply.getHeaders() as Record<string, string | number | string[]> // a copy, ours to extend
    for (const name in headers) if (headers[name] === undefined) delete headers[name]
    reply.hijack()
    // An empty body reaches the transport as null (a JSON-RPC parse error).
    const refused = transport.handle(req.body ?? null, req.headers.accept, Array.isArray(version) ? version[0] : version, reply.raw,
      { apiKey, requestId: req.id }, headers)
    if (refused) reply.raw.writeHead(refused.status, { ...headers, 'content-type': 'application/json' }).end(rpcError(refused.code, refused.message, refused.burrowCode))
  })

  // Stateless: no server-initiated stream (GET) and no session to end (DELETE).
  const notAllowed = async (_req: FastifyRequest, reply: FastifyReply) => reply.code(405).header('allow', 'POST')
    .type('application/json').send(rpcError(-32000, 'Method not allowed: this MCP endpoint is stateless; use POST.'))
  app.get('/mcp', { schema: { hide: true } }, notAllowed)
  app.delete('/mcp', { schema: { hide: true } }, notAllowed)
}

function rpcError(code: number, message: string, burrowCode?: string): string {
  return JSON.stringify({ jsonrpc: '2.0', error: { code, message, ...(burrowCode ? { data: { code: burrowCode } } : {}) }, id: null })
}
