/**
 * MCP over streamable HTTP at `/mcp`, stateless: every POST gets a fresh server and
 * transport (the SDK's recommended stateless pattern), so nothing is kept between
 * requests and any instance can answer. Responses are SSE streams (the MCP client
 * accepts both JSON and SSE), so a turn's progress notifications reach the client as
 * they happen. The bearer key goes into each tool call's CallContext; the service
 * authenticates it, so a missing or bad key is an `UNAUTHORIZED` tool error.
 *
 * Stateless means a client's `notifications/cancelled` arrives in another POST, at another
 * server, which has no such call: cancelling a tool call over HTTP does not stop its turn
 * (it does over stdio). A client that disconnects does not stop it either.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { ERROR_TABLE } from '../../core/errors.js'
import type { SessionService } from '../../core/session-service.js'
import { callContext } from '../rest/call-context.js'
import { fromFastifyError } from '../rest/problem.js'
import { createMcpServer, mcpIdle } from './mcp-server.js'

export function mcpHttpRoutes(app: FastifyInstance, service: SessionService): void {
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
    const { apiKey } = callContext(req)
    const server = createMcpServer(service, () => ({ apiKey, requestId: req.id }), {
      logError: (err) => req.log.error({ err }, 'internal error in an MCP tool call'),
      version: service.capabilities().version,
    })
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    // Headers set by hooks (x-request-id, CORS) would be lost with the hijacked reply: hand them to the raw response.
    for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value)
    reply.hijack()
    // A client that disconnects does not cancel its turn (as on REST): the server closes once its calls end.
    reply.raw.on('close', () => {
      void mcpIdle(server).then(() => Promise.all([transport.close(), server.close()])).catch(() => {})
    })
    try {
      await server.connect(transport)
      // The app has parsed the JSON body already; an empty body reaches the transport as null (a JSON-RPC parse error).
      await transport.handleRequest(req.raw, reply.raw, req.body ?? null)
    } catch (err) {
      req.log.error({ err }, 'MCP request failed')
      if (!reply.raw.headersSent) reply.raw.writeHead(500, { 'content-type': 'application/json' }).end(rpcError(-32603, ERROR_TABLE.INTERNAL.message))
      else reply.raw.end()
    }
  })

  // Stateless: no server-initiated stream (GET) and no session to end (DELETE).
  const notAllowed = async (_req: FastifyRequest, reply: FastifyReply) => reply.code(405).header('allow', 'POST')
    .type('application/json').send(rpcError(-32000, 'Method not allowed: this MCP endpoint is stateless; use POST.'))
  app.get('/mcp', { schema: { hide: true } }, notAllowed)
  app.delete('/mcp', { schema: { hide: true } }, notAllowed)
}

function rpcError(code: number, message: string): string {
  return JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null })
}
