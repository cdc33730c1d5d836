// A TCP proxy on loopback in front of another address: stopping it is a database that went away
// (refused connections, every open one cut), starting it again on the same port is the way back.
import { createServer, connect, type Server, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'

export class TcpProxy {
  private server: Server | null = null
  private readonly sockets = new Set<Socket>()
  port = 0

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** Listens (on the same port as before, after a stop). */
  async start(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.targetPort, this.targetHost)
      for (const s of [client, upstream]) {
        this.sockets.add(s)
        s.on('close', () => this.sockets.delete(s))
        s.on('error', () => undefined)
      }
      client.pipe(upstream)
      upstream.pipe(client)
      client.on('close', () => upstream.destroy())
      upstream.on('close', () => client.destroy())
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(this.port, '127.0.0.1', () => resolve())
    })
    this.port = (server.address() as AddressInfo).port
    this.server = server
  }

  /** Stops listening and cuts every connection through it. */
  async stop(): Promise<void> {
    const server = this.server
    this.server = null
    for (const s of this.sockets) s.destroy()
    this.sockets.clear()
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
