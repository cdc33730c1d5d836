import type { IncomingMessage, Server, ServerResponse } from 'node:http'

/** What {@link HttpDrain.close} found and did. */
export interface DrainResult {
  /** Requests still in flight when the listener closed. */
  inFlight: number
  /** Whether the time ran out and the connections left were destroyed. */
  forced: boolean
  /** Responses destroyed unfinished when the time ran out (clients that did not read, requests that never ended). */
  cut: number
  /** ms from the listener's close until every connection was gone. */
  ms: number
}

/**
 * Closes an HTTP server without cutting a response: every request in flight finishes and its
 * response is handed to the kernel (`finish`) before its socket closes; only what is still
 * unfinished when the time is up is destroyed.
 *
 * Why not fastify's own closing: `forceCloseConnections: true` destroys every socket the moment
 * `app.close()` runs, including one whose answer is being written; `'idle'` (and plain
 * `server.close()`) leaves a kept-alive socket open after its in-flight response ends, so the
 * close waits for the client's keep-alive timeout. This tracks each response itself (the raw
 * `request` event, so hijacked replies such as MCP's count too) and closes sockets as they fall idle.
 */
export class HttpDrain {
  private readonly open = new Set<ServerResponse>()
  private draining = false
  private onIdle: (() => void) | null = null

  constructor(private readonly server: Server) {
    server.on('request', (req: IncomingMessage, res: ServerResponse) => this.track(req, res))
  }

  /** Requests whose response has not finished (nor been abandoned by its client) yet. */
  get inFlight(): number {
    return this.open.size
  }

  /**
   * From now on every response asks its client to close the connection afterwards, so kept-alive
   * clients move on to another instance by themselves. The listener stays open: late clients and
   * probes get an answer (the service's `SHUTTING_DOWN`, `/readyz` 503) rather than a refused connection.
   */
  begin(): void {
    if (this.draining) return
    this.draining = true
    for (const res of this.open) askToClose(res)
  }

  /**
   * Stops listening, waits for the requests in flight to finish (closing each kept-alive socket
   * once it is idle) and for every connection to be gone; after `timeoutMs`, destroys what is left.
   */
  async close(timeoutMs: number): Promise<DrainResult> {
    this.begin()
    const t0 = performance.now()
    const inFlight = this.open.size
    const closed = new Promise<void>((resolve) => {
      // Also closes the connections idle right now (Node ≥ 19); it reports when the last connection is gone.
      if (this.server.listening) this.server.close(() => resolve())
      else resolve()
    })
    let timer: NodeJS.Timeout | undefined
    const timeUp = new Promise<'timeout'>((resolve) => { timer = setTimeout(() => resolve('timeout'), Math.max(0, timeoutMs)) })
    const finished = new Promise<void>((resolve) => {
      if (this.open.size === 0) resolve()
      else this.onIdle = resolve
    })
    try {
      if (await Promise.race([finished.then(() => 'finished' as const), timeUp]) === 'finished') {
        this.server.closeIdleConnections()
        // A connection that carries no tracked request (a client that sent half a request, then stalled) still holds the close.
        if (await Promise.race([closed.then(() => 'closed' as const), timeUp]) === 'closed') return { inFlight, forced: false, cut: 0, ms: performance.now() - t0 }
      }
      const cut = this.open.size
      this.server.closeAllConnections()
      await closed
      return { inFlight, forced: true, cut, ms: performance.now() - t0 }
    } finally {
      clearTimeout(timer)
      this.onIdle = null
    }
  }

  private track(_req: IncomingMessage, res: ServerResponse): void {
    this.open.add(res)
    if (this.draining) askToClose(res)
    res.once('close', () => {
      this.open.delete(res)
      if (!this.draining) return
      // A kept-alive socket whose last response just ended is idle now: close it rather than wait for the client's timeout.
      // Deferred: Node marks the connection idle after the response's own 'close' handlers have run.
      setImmediate(() => this.server.closeIdleConnections())
      if (this.open.size === 0) this.onIdle?.()
    })
  }
}

/** `Connection: close` on a response whose head is not written yet; Node then ends the socket after it. */
function askToClose(res: ServerResponse): void {
  if (!res.headersSent) res.setHeader('connection', 'close')
}
