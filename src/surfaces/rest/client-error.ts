import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { BurrowError } from '../../core/errors.js'
import { problemOf } from '../http/problem.js'

/** How long a refused connection may stay half-open for the client to read the answer. */
const LINGER_MS = 2_000

interface ParserError extends Error {
  code?: string
  reason?: string
  rawPacket?: unknown
}

/** Node's HTTP parser errors (`HPE_*`, timeouts) as rows of the table: 431 and 408 are not in it. */
export function fromClientError(err: ParserError): BurrowError {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new BurrowError('PAYLOAD_TOO_LARGE', 'The request line and headers are larger than the server accepts.', { field: 'header' })
    case 'ERR_HTTP_REQUEST_TIMEOUT':
    case 'ERR_HTTP_HEADERS_TIMEOUT':
      return new BurrowError('INVALID_REQUEST', 'The request did not arrive in time.')
    case 'HPE_INVALID_CONTENT_LENGTH':
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
      return new BurrowError('INVALID_REQUEST', 'The Content-Length header is invalid.', { field: 'header/content-length' })
    case 'HPE_INVALID_METHOD':
      return new BurrowError('INVALID_REQUEST', 'The request method is not one HTTP knows.', { field: 'method' })
    default: {
      // llhttp's reason ("Invalid header value char") names the rule broken, never the bytes.
      const reason = typeof err.reason === 'string' && err.reason.length > 0 ? `: ${err.reason}` : ''
      return new BurrowError('INVALID_REQUEST', `The request is not valid HTTP/1.1${reason}.`)
    }
  }
}

/**
 * fastify's `clientErrorHandler` option: a request Node's HTTP parser refuses (control
 * characters in a header, headers over the size limit, a malformed request line or
 * Content-Length) never becomes a request, so it is answered here on the raw socket with a
 * minimal problem document, and the connection closed. Logged without the request's bytes
 * (`rawPacket`), which may hold credentials.
 */
export function clientErrorHandler(nextRequestId: () => string) {
  return function onClientError(this: FastifyInstance, err: ParserError, socket: Duplex): void {
    if (err.code === 'ECONNRESET' || socket.destroyed) return
    const e = fromClientError(err)
    const id = nextRequestId()
    this.log.info({ request_id: id, code: e.code, parser_error: err.code }, 'malformed request refused')
    // A response already under way on this connection cannot be followed by another.
    const current = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage
    if (!socket.writable || current?.headersSent) {
      socket.destroy()
      return
    }
    const body = JSON.stringify(problemOf(e, id))
    const status = e.status
    // The answer to a HEAD request has no body, even when the rest of the request is malformed.
    const head = Buffer.isBuffer(err.rawPacket) && err.rawPacket.subarray(0, 5).toString('latin1') === 'HEAD '
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\ncontent-type: application/problem+json; charset=utf-8\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${id}\r\nconnection: close\r\n\r\n${head ? '' : body}`,
    )
    // Half-closed, so the client reads the answer; one that does not close its side is cut off.
    const timer = setTimeout(() => socket.destroy(), LINGER_MS)
    timer.unref()
    socket.once('close', () => clearTimeout(timer))
  }
}

/**
 * For the HTTP server's `checkExpectation` event: an `Expect` other than `100-continue`, which
 * Node would answer 417 with no body (417 is not in the table), is INVALID_REQUEST naming the
 * header. Such a request never reaches fastify.
 */
export function expectationHandler(log: FastifyInstance['log'], nextRequestId: () => string) {
  return (_req: IncomingMessage, res: ServerResponse): void => {
    const id = nextRequestId()
    const e = new BurrowError('INVALID_REQUEST', 'The server meets no expectation but 100-continue.', { field: 'header/expect' })
    log.info({ request_id: id, code: e.code, detail: e.message }, 'request refused')
    const body = JSON.stringify(problemOf(e, id))
    res
      .writeHead(e.status, {
        'content-type': 'application/problem+json; charset=utf-8',
        'content-length': Buffer.byteLength(body),
        'x-request-id': id,
        connection: 'close',
      })
      .end(body)
  }
}
