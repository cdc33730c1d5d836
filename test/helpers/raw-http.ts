// HTTP/1.1 on a raw socket, for requests no HTTP client would send (control characters in
// headers, broken request lines, bodies written in pieces) and a strict reading of the answer.
import { connect } from 'node:net'

export interface RawResponse {
  status: number
  headers: Record<string, string>
  /** The body, de-chunked, as text (undefined when no complete response came). */
  body: string
  /** What the socket delivered, for messages. */
  raw: string
  /** How the exchange ended: the server closed, we stopped reading (`stopAfterHeaders`), or an error / timeout. */
  end: 'closed' | 'stopped' | `error:${string}` | 'timeout'
}

export interface RawOptions {
  /** Written one after another, a macrotask apart (a client still sending). */
  chunks?: Array<string | Buffer>
  /**
   * Read nothing until everything is written (each write flushed): a client that sends its
   * whole body before it looks at the answer.
   */
  readAfterSending?: boolean
  /** Stop reading once the head has come when it satisfies this (an endless SSE stream). */
  stopAfterHeaders?: (status: number, headers: Record<string, string>) => boolean
  timeoutMs?: number
}

/**
 * Sends `head` (and the chunks) on a new connection and reads until the server closes it.
 * Requests should say `connection: close` so that a complete answer ends the exchange.
 */
export function rawRequest(url: string, head: string | Buffer, opts: RawOptions = {}): Promise<RawResponse> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname)
    const got: Buffer[] = []
    let end: RawResponse['end'] | undefined
    const finish = (how: RawResponse['end']) => {
      if (end) return
      end = how
      clearTimeout(timer)
      socket.destroy()
      resolve(parse(Buffer.concat(got), how))
    }
    const timer = setTimeout(() => finish('timeout'), opts.timeoutMs ?? 10_000)
    socket.on('data', (d: Buffer) => {
      got.push(d)
      if (opts.stopAfterHeaders) {
        const r = parse(Buffer.concat(got), 'stopped')
        if (r.status > 0 && opts.stopAfterHeaders(r.status, r.headers)) finish('stopped')
      }
    })
    socket.on('error', (e: NodeJS.ErrnoException) => finish(`error:${e.code ?? e.message}`))
    socket.on('close', () => finish('closed'))
    const write = (c: string | Buffer) =>
      new Promise<void>((r) => {
        if (!opts.readAfterSending) {
          socket.write(c)
          r()
          return
        }
        socket.write(c, () => r())
      })
    socket.on('connect', async () => {
      if (opts.readAfterSending) socket.pause()
      await write(head)
      for (const c of opts.chunks ?? []) {
        await new Promise((r) => setTimeout(r, 0))
        if (socket.destroyed || end) return
        await write(c)
      }
      socket.resume()
    })
  })
}

function parse(data: Buffer, end: RawResponse['end']): RawResponse {
  const raw = data.toString('latin1')
  const split = raw.indexOf('\r\n\r\n')
  const none = { status: 0, headers: {}, body: '', raw, end }
  if (split < 0) return none
  const [statusLine, ...lines] = raw.slice(0, split).split('\r\n')
  const m = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine ?? '')
  if (!m) return none
  const headers: Record<string, string> = {}
  for (const l of lines) {
    const i = l.indexOf(':')
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim()
  }
  let body = data.subarray(Buffer.byteLength(raw.slice(0, split + 4), 'latin1'))
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) body = dechunk(body)
  else if (headers['content-length'] !== undefined) body = body.subarray(0, Number(headers['content-length']))
  return { status: Number(m[1]), headers, body: body.toString('utf8'), raw, end }
}

function dechunk(b: Buffer): Buffer {
  const out: Buffer[] = []
  let at = 0
  for (;;) {
    const eol = b.indexOf('\r\n', at)
    if (eol < 0) break
    const size = parseInt(b.subarray(at, eol).toString('latin1'), 16)
    if (!Number.isFinite(size) || size === 0) break
    out.push(b.subarray(eol + 2, eol + 2 + size))
    at = eol + 2 + size + 2
  }
  return Buffer.concat(out)
}

/** A request head: request line, headers (`connection: close` added), blank line. */
export function head(method: string, path: string, headers: Record<string, string> = {}): string {
  const lines = [
    `${method} ${path} HTTP/1.1`,
    'host: 127.0.0.1',
    'connection: close',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ]
  return `${lines.join('\r\n')}\r\n\r\n`
}
