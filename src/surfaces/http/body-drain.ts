import type { IncomingMessage } from 'node:http'

/** How long a refused body may take to arrive before the answer goes anyway. */
const DRAIN_TIMEOUT_MS = 10_000

/** Bytes of a refused body read and thrown away at most: 16 bodies' worth, at most 64 MiB (never less than one body). */
export function drainBound(bodyLimit: number): number {
  return Math.max(bodyLimit, Math.min(16 * bodyLimit, 64 * 1024 * 1024))
}

/**
 * Reads and throws away the rest of a body refused as too large, so that the refusal reaches
 * clients that send their whole body before they read: the answer closes the connection, and
 * a socket closed with unread data is reset, which can destroy the answer before the client
 * reads it. Resolves once the body has ended (or the client went away), or — giving up, so
 * the client may see that reset after all — once more than `bound` bytes came, when the
 * declared Content-Length is over `bound`, or after {@link DRAIN_TIMEOUT_MS}.
 */
export function discardBody(req: IncomingMessage, bound: number): Promise<void> {
  // Errors of an abandoned request are expected from here on; without a listener one would crash the process.
  req.on('error', ignore)
  if (req.complete || req.readableEnded || req.destroyed) return Promise.resolve()
  const declared = Number(req.headers['content-length'])
  if (declared > bound) return Promise.resolve()
  return new Promise<void>((resolve) => {
    let read = 0
    const timer = setTimeout(done, DRAIN_TIMEOUT_MS)
    function onData(chunk: Buffer): void {
      read += chunk.length
      if (read > bound) done()
    }
    function done(): void {
      clearTimeout(timer)
      req.off('data', onData)
      req.off('end', done)
      req.off('close', done)
      resolve()
    }
    req.on('data', onData)
    req.on('end', done)
    req.on('close', done)
    req.resume()
  })
}

function ignore(): void {}
