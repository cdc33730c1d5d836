import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

/** What {@link HttpDrain.close} found and did. */
export interface DrainResult {
  /** Requests still in flight when the close began. */
  inFlight: number
  /** Whether the time ran out and the connections left were destroyed. */
  forced: boolean
  /** Responses destroyed unfinished when the time ran out (clients that did not read, requests that never arrived in full). */
  cut: number
  /** ms from the start of the close until every connection was gone. */
  ms: number
}

/**
 * Closes an HTTP server without cutting a response: every request in flight finishes and its
 * response is flushed to the kernel before its socket closes; only what is still open when the
 * time is up is destroyed.
 *
 * Why not fastify's closing or Node's: `forceCloseConnections: true` destroys every socket the
 * moment `app.close()` runs, including one whose answer is being written. `server.close()` and
 * `closeIdleConnections()` count a connection as idle once its response has *ended*, not once it
 * is *flushed*, so they too destroy a long answer still on its way to a slow client; and a kept-alive
 * socket whose in-flight response ends after them stays open until the client's keep-alive timeout.
 * So responses are tracked here (the raw `request` event, which hijacked replies such as MCP's
 * also pass), `server.close()` runs only while no ended response is unflushed, and each socket is
 * ended as its last response is flushed.
 */
export class HttpDrain {
  private readonly open = new Set<ServerResponse>()
  /** Responses not yet flushed, per socket (more than one only with pipelining). */
  private readonly active = new Map<Socket, number>()
  private draining = false
  /** Conditions {@link close} waits on, re-checked as responses close. */
  private readonly waiters = new Set<() => void>()

  constructor(private readonly server: Server) {
    server.on('request', (req: IncomingMessage, res: ServerResponse) => this.track(req.socket, res))
  }

  /** Requests whose response has not been flushed (nor abandoned by its client) yet. */
  get inFlight(): number {
    return this.open.size
  }

  /**
   * From now on every response asks its client to close the connection afterwards, and each
   * socket is closed once its last response is flushed. The listener stays open: late clients and
   * probes get an answer (the service's `SHUTTING_DOWN`, `/readyz` 503), not a refused connection.
   */
  begin(): void {
    if (this.draining) return
    this.draining = true
    for (const res of this.open) askToClose(res)
  }

  /**
   * Stops listening as soon as no answer is ended but unflushed (at once, usually), which also
   * closes the idle kept-alive sockets; then waits for the requests in flight to be answered and
   * flushed and for every connection to be gone. Once `timeoutMs` is over, destroys what is left.
   */
  async close(timeoutMs: number): Promise<DrainResult> {
    this.begin()
    const t0 = performance.now()
    const inFlight = this.open.size
    let timer: NodeJS.Timeout | undefined
    const timeUp = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), Math.max(0, timeoutMs))
    })
    const result = (forced: boolean, cut: number): DrainResult => ({ inFlight, forced, cut, ms: performance.now() - t0 })
    try {
      let closed: Promise<'closed'> | null = null
      if ((await Promise.race([this.when(() => !this.endedUnflushed()), timeUp])) !== 'timeout') {
        // Same tick as the check (only promise jobs ran since, no I/O): no answer can have ended meanwhile.
        closed = new Promise((resolve) => {
          if (this.server.listening) this.server.close(() => resolve('closed'))
          else resolve('closed')
        })
        // Sockets end as their last answer is flushed; one that carries no answered request (a client
        // that sent half a request, then stalled) holds the close until the time is up.
        if ((await Promise.race([closed, timeUp])) === 'closed') return result(false, 0)
      }
      const cut = this.open.size
      this.server.closeAllConnections()
      if (closed) await closed
      else if (this.server.listening) await new Promise<void>((resolve) => this.server.close(() => resolve()))
      return result(true, cut)
    } finally {
      clearTimeout(timer)
      this.waiters.clear()
    }
  }

  /** A response whose end() was called but whose last bytes are not with the kernel yet. */
  private endedUnflushed(): boolean {
    for (const res of this.open) if (res.writableEnded && !res.writableFinished) return true
    return false
  }

  /** Resolves once `cond` holds, checked now and whenever a response closes. */
  private when(cond: () => boolean): Promise<'ok'> {
    return new Promise((resolve) => {
      if (cond()) {
        resolve('ok')
        return
      }
      const check = () => {
        if (cond()) {
          this.waiters.delete(check)
          resolve('ok')
        }
      }
      this.waiters.add(check)
    })
  }

  private track(socket: Socket, res: ServerResponse): void {
    this.open.add(res)
    this.active.set(socket, (this.active.get(socket) ?? 0) + 1)
    if (this.draining) askToClose(res)
    // 'close' comes after 'finish' (the last byte handed to the kernel), or when the client went away.
    res.once('close', () => {
      this.open.delete(res)
      const left = (this.active.get(socket) ?? 1) - 1
      if (left > 0) this.active.set(socket, left)
      else this.active.delete(socket)
      if (!this.draining) return
      if (left === 0) closeGracefully(socket)
      for (const check of [...this.waiters]) check()
    })
  }
}

/** `Connection: close` on a response whose head is not written yet; Node then ends the socket after it. */
function askToClose(res: ServerResponse): void {
  if (!res.headersSent) res.setHeader('connection', 'close')
}

/**
 * Ends a socket whose last response is flushed: the FIN follows the data, then the socket is
 * destroyed (what Node does after a `Connection: close` response). A kept-alive socket whose head
 * went out before the drain began (an SSE stream) would otherwise wait for the client's timeout.
 */
function closeGracefully(socket: Socket): void {
  if (socket.destroyed) return
  socket.end()
  if (socket.writableFinished) socket.destroy()
  else socket.once('finish', () => socket.destroy())
}
