// Small loopback HTTP servers for client tests: a port nothing listens on, a server that
// sends fixed SSE frames, and one that answers from a script and records every request.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import { createServer as createNetServer, type AddressInfo } from 'node:net'
import type { Test } from 'tap'

/** A loopback port nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const srv = createNetServer()
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve))
  const { port } = srv.address() as AddressInfo
  await new Promise<void>((resolve) => srv.close(() => resolve()))
  return port
}

/** Listens on an ephemeral loopback port, closed (open connections too) on teardown; returns the origin. */
export async function listenLoopback(t: Test, server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  )
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** A bare SSE server sending `frames` verbatim to every request (for wire events the fake LLM does not script). */
export async function sseServer(t: Test, frames: string[]): Promise<string> {
  return listenLoopback(
    t,
    createServer((rq, rs) => {
      rq.resume()
      rq.on('end', () => {
        rs.writeHead(200, { 'content-type': 'text/event-stream' })
        for (const f of frames) rs.write(f)
        rs.end()
      })
    }),
  )
}

export interface Reply {
  status?: number
  headers?: Record<string, string>
  /** Sent as it is when a string, as JSON otherwise. */
  body?: unknown
  /** Never answer, or send the head and half a body and then stall. */
  hang?: 'headers' | 'body'
}

export interface Seen {
  at: number
  headers: IncomingHttpHeaders
  body: string
}

/**
 * A plain HTTP server answering each request with the next reply of `replies` (status 200
 * and a JSON content type unless told otherwise); once the script is spent it answers with
 * `after(body)`, by default 200 `{}`. Records when each request arrived, its headers and body.
 */
export async function scriptedServer(
  t: Test,
  replies: Reply[],
  after: (body: string) => Reply = () => ({ body: {} }),
): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = []
  const url = await listenLoopback(
    t,
    createServer(async (rq, rs) => {
      let body = ''
      for await (const c of rq) body += String(c)
      seen.push({ at: performance.now(), headers: rq.headers, body })
      const r = replies.shift() ?? after(body)
      if (r.hang === 'headers') return
      rs.writeHead(r.status ?? 200, { 'content-type': 'application/json', ...r.headers })
      if (r.hang === 'body') {
        rs.write('{"data": [')
        return
      }
      rs.end(typeof r.body === 'string' ? r.body : r.body === undefined ? '' : JSON.stringify(r.body))
    }),
  )
  return { url, seen }
}

/** Milliseconds between consecutive requests. */
export const gaps = (seen: readonly Seen[]): number[] => seen.slice(1).map((s, i) => s.at - seen[i]!.at)
