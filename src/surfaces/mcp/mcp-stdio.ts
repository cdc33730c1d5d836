/**
 * MCP over stdio (for `burrow mcp` and MCP hosts that spawn a process): one server on
 * stdin/stdout. Nothing but protocol messages may be written to stdout — log to stderr.
 */
import { randomUUID } from 'node:crypto'
import type { Readable, Writable } from 'node:stream'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import type { SessionOperations } from '../../core/session-service.js'
import { createMcpServer, mcpIdle } from './mcp-server.js'

export interface StdioStreams {
  stdin: Readable
  stdout: Writable
}

/**
 * Serves MCP on the given streams (default: the process's) until stdin ends. Tool calls
 * still running then are allowed to finish and answer first, so requests piped in
 * (`… | burrow mcp`) all get their responses.
 */
export async function runMcpStdio(
  service: SessionOperations,
  opts: { apiKey?: string | undefined; version?: string },
  io?: StdioStreams,
): Promise<void> {
  const stdin = io?.stdin ?? process.stdin
  const stdout = io?.stdout ?? process.stdout
  const server = createMcpServer(service, () => ({ apiKey: opts.apiKey, requestId: `mcp-${randomUUID()}` }), {
    logError: (err, requestId) =>
      process.stderr.write(`burrow mcp: internal error (${requestId}): ${String((err as Error)?.stack ?? err)}\n`),
    ...(opts.version ? { version: opts.version } : {}),
  })
  const transport = new StdioServerTransport(stdin, stdout)
  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve()
  })
  const ended = new Promise<void>((resolve) => {
    stdin.once('end', resolve)
    stdin.once('close', resolve)
  })
  await server.connect(transport)
  await Promise.race([ended, closed])
  await mcpIdle(server)
  await new Promise<void>((r) => setImmediate(r)) // let the last responses reach stdout
  await server.close()
}
