/**
 * Stateless MCP streamable HTTP for one long-lived McpServer: a Transport (the SDK's
 * interface for custom transports) onto which every POST is multiplexed.
 *
 * Why not the SDK's StreamableHTTPServerTransport: stateless, it needs a new server and
 * transport per POST, and it converts each Node request into a Fetch Request and back
 * (web streams) — about 1 ms of CPU per call, ten times a whole REST turn. Here the
 * request ids of each POST are mapped to ids unique within the server on the way in and
 * back on the way out, so concurrent clients that all use id 1 never meet, and the
 * responses go out as the same SSE stream the SDK writes (`event: message`, one JSON-RPC
 * message per event; progress notifications of a request on its stream as they happen).
 *
 * The checks of the SDK's transport are kept: Accept must list application/json and
 * text/event-stream (406), the body is JSON-RPC messages (400, -32700), an initialize
 * request comes alone (400, -32600), an unknown MCP-Protocol-Version is refused (400);
 * a POST of notifications and responses only is answered 202.
 *
 * A plain `tools/call` (params: name, arguments, _meta) goes straight to the server's own
 * tools/call handler (`toolCall`), without the SDK's generic request path (its zod checks of
 * the message, the request and the result cost more than the rest of the call): the same
 * handler, the same result, the same progress notifications. Every other message, and a
 * tools/call with anything more, takes the SDK's path.
 *
 * Stateless means a client's `notifications/cancelled` names an id of its own that the
 * server cannot tell from another client's: cancellations are acknowledged and dropped
 * (a cancelled call's turn runs on, as it does when the client disconnects).
 */
import type { ServerResponse } from 'node:http'
import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js'
import { SUPPORTED_PROTOCOL_VERSIONS, type JSONRPCMessage, type MessageExtraInfo, type RequestId } from '@modelcontextprotocol/sdk/types.js'
import type { Extra, McpToolCall } from './mcp-server.js'

/** What a tool call learns of the HTTP request that carried it. */
export interface ExchangeContext { apiKey: string | undefined; requestId: string }

/** One POST: its response stream and the requests on it still unanswered. */
interface Exchange {
  res: ServerResponse
  ctx: ExchangeContext
  /** Internal id → the client's id, for this POST's requests still unanswered (null: a single call, see handle). */
  open: Map<number, RequestId> | null
  headers: Record<string, string | number | string[]>
  started: boolean
  gone: boolean
}

/** An HTTP-level refusal, answered as the SDK's transport answers it. */
export interface Refusal { status: number; code: number; message: string }

const MAX_BATCH = 100

const isId = (v: unknown) => typeof v === 'string' || (typeof v === 'number' && Number.isInteger(v))
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/** The signal of a direct call: nothing cancels it (see above). */
const NEVER = new AbortController().signal

type PlainToolCall = { name: string; arguments?: Record<string, unknown>; _meta?: Record<string, unknown> }

/** tools/call params with nothing but a name, arguments and _meta (progressToken): what the direct path serves. */
function isPlainToolCall(p: unknown): p is PlainToolCall {
  if (!isObject(p) || typeof p.name !== 'string') return false
  for (const k in p) if (k !== 'name' && k !== 'arguments' && k !== '_meta') return false
  return (p.arguments === undefined || isObject(p.arguments)) && (p._meta === undefined || isObject(p._meta))
}

/**
 * The shape of a JSON-RPC 2.0 message: a request (method, id), a notification (method) or a
 * response (id, result or error). The server validates each method's params against its own
 * schema (the SDK's, and each tool's), so the envelope is all that is checked here.
 */
function isMessage(m: unknown): boolean {
  if (!isObject(m) || m.jsonrpc !== '2.0') return false
  if ('method' in m) return typeof m.method === 'string' && (!('id' in m) || isId(m.id)) && (m.params === undefined || isObject(m.params))
  return isId(m.id) && (('result' in m && isObject(m.result)) !== ('error' in m && isObject(m.error)))
}

export class HttpMuxTransport implements Transport {
  onclose?: (() => void) | undefined
  onerror?: ((error: Error) => void) | undefined
  onmessage?: (<T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void) | undefined

  /** The server's tools/call handler (toolCallOf(server)), for the direct path; without it every call takes the SDK's. */
  toolCall: McpToolCall | undefined
  private next = 0
  private readonly pending = new Map<number, Exchange>()
  private closed = false

  async start(): Promise<void> {}

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    for (const ex of new Set(this.pending.values())) end(ex)
    this.pending.clear()
    this.onclose?.()
  }

  /** The context of the POST that carried the request with this (internal) id. */
  context(extra: { requestId: RequestId }): ExchangeContext | undefined {
    const own = (extra as { exchange?: ExchangeContext }).exchange // set on the direct paths' extra
    return own ?? (typeof extra.requestId === 'number' ? this.pending.get(extra.requestId)?.ctx : undefined)
  }

  /**
   * Takes one POST: checks it, then hands its messages to the server. Returns a refusal to
   * answer as JSON instead, or null once the response is under way (the transport ends it).
   */
  handle(body: unknown, accept: string | undefined, protocolVersion: string | undefined, res: ServerResponse,
    ctx: ExchangeContext, headers: Record<string, string | number | string[]>): Refusal | null {
    if (this.closed) return { status: 503, code: -32000, message: 'Service Unavailable: the server is shutting down' }
    if (!accept?.includes('application/json') || !accept.includes('text/event-stream')) {
      return { status: 406, code: -32000, message: 'Not Acceptable: Client must accept both application/json and text/event-stream' }
    }
    const messages = (Array.isArray(body) ? body : [body]) as JSONRPCMessage[]
    if (messages.length === 0 || messages.length > MAX_BATCH) return { status: 400, code: -32600, message: `Invalid Request: a batch holds 1 to ${MAX_BATCH} messages` }
    let initialize = false
    let requests = 0
    for (const m of messages as unknown[]) {
      if (!isMessage(m)) return { status: 400, code: -32700, message: 'Parse error: Invalid JSON-RPC message' }
      const r = m as { method?: unknown; id?: unknown }
      if (r.method !== undefined && 'id' in r) {
        requests++
        if (r.method === 'initialize') initialize = true
      }
    }
    if (initialize && messages.length > 1) return { status: 400, code: -32600, message: 'Invalid Request: Only one initialization request is allowed' }
    if (!initialize && protocolVersion !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.includes(protocolVersion)) {
      return {
        status: 400, code: -32000,
        message: `Bad Request: Unsupported protocol version: ${protocolVersion} (supported versions: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`,
      }
    }

    // The usual POST: one plain tools/call without a progress token. Nothing can be sent on its
    // stream but its answer, so it needs no id mapping and no registration.
    if (!Array.isArray(body) && requests === 1 && this.toolCall) {
      const m = body as { id: RequestId; method: string; params?: unknown }
      if (m.method === 'tools/call' && isPlainToolCall(m.params) && m.params._meta?.progressToken === undefined) {
        this.single(this.toolCall, m.id, m.params, { res, ctx, open: null, headers, started: false, gone: false })
        return null
      }
    }

    const ex: Exchange = { res, ctx, open: new Map(), headers, started: false, gone: false }
    if (requests === 0) {
      res.writeHead(202, headers).end()
    } else {
      // A client that goes away does not stop its calls (as on REST); their answers are dropped.
      res.on('close', () => { ex.gone = true })
    }
    // Every request of the POST is registered before any is dispatched, so none can end the stream early.
    const first = this.next + 1
    for (const m of messages) if ('method' in m && 'id' in m) this.register(ex, m.id)
    let id = first
    for (const m of messages) {
      if (!('method' in m)) continue // a response to a server request: stateless, the server sends none
      if (!('id' in m)) {
        if (m.method !== 'notifications/cancelled') this.onmessage?.(m) // cancelled: another client's id space, see above
        continue
      }
      if (this.toolCall && m.method === 'tools/call' && isPlainToolCall(m.params)) this.direct(this.toolCall, id, m.params, ctx)
      else this.onmessage?.({ ...m, id })
      id++
    }
    return null
  }

  private register(ex: Exchange, clientId: RequestId): void {
    const id = ++this.next
    ex.open!.set(id, clientId)
    this.pending.set(id, ex)
  }

  /** A tools/call through the server's handler; answered (and errors mapped) as the SDK's Protocol answers. */
  private direct(toolCall: McpToolCall, id: number, params: PlainToolCall, ctx: ExchangeContext): void {
    const extra = {
      signal: NEVER, requestId: id, _meta: params._meta, sessionId: undefined, exchange: ctx,
      sendNotification: (n: { method: string; params?: unknown }) => this.send({ ...n, jsonrpc: '2.0' } as JSONRPCMessage, { relatedRequestId: id }),
      sendRequest: refuseRequest,
    } as unknown as Extra
    toolCall(params, extra).then(
      (result) => this.send({ jsonrpc: '2.0', id, result }),
      (err: unknown) => this.send({ jsonrpc: '2.0', id, error: protocolError(err) }),
    ).catch((err: unknown) => this.onerror?.(err as Error))
  }

  /** The single plain tools/call of a POST (see handle): its answer ends the stream. */
  private single(toolCall: McpToolCall, clientId: RequestId, params: PlainToolCall, ex: Exchange): void {
    const extra = {
      signal: NEVER, requestId: ++this.next, _meta: params._meta, sessionId: undefined, exchange: ex.ctx,
      sendNotification: (n: { method: string; params?: unknown }) => { write(ex, `event: message\ndata: ${JSON.stringify({ ...n, jsonrpc: '2.0' })}\n\n`) },
      sendRequest: refuseRequest,
    } as unknown as Extra
    toolCall(params, extra).then(
      (result) => end(ex, `event: message\ndata: ${responseJson({ jsonrpc: '2.0', id: 0, result } as JSONRPCMessage, clientId)}\n\n`),
      (err: unknown) => end(ex, `event: message\ndata: ${responseJson({ jsonrpc: '2.0', id: 0, error: protocolError(err) } as JSONRPCMessage, clientId)}\n\n`),
    ).catch((err: unknown) => this.onerror?.(err as Error))
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const isResponse = 'id' in message && !('method' in message)
    const internal = isResponse ? (message as { id: RequestId }).id : options?.relatedRequestId
    const ex = typeof internal === 'number' ? this.pending.get(internal) : undefined
    // Messages of no POST (server-initiated requests, notifications unrelated to a request) have no stream to go to.
    if (!ex || typeof internal !== 'number') return
    const event = `event: message\ndata: ${isResponse ? responseJson(message, ex.open!.get(internal)!) : JSON.stringify(message)}\n\n`
    if (!isResponse) return write(ex, event)
    const open = ex.open!
    open.delete(internal)
    this.pending.delete(internal)
    if (open.size > 0) write(ex, event)
    else end(ex, event)
  }
}

const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }

const refuseRequest = () => Promise.reject(new Error('stateless HTTP: the server sends no requests'))

/** A handler's failure as the SDK's Protocol answers it (McpError keeps its code and data). */
function protocolError(e: unknown): { code: number; message: string; data?: unknown } {
  const err = e as { code?: unknown; message?: unknown; data?: unknown } | undefined
  return {
    code: Number.isSafeInteger(err?.code) ? err!.code as number : -32603,
    message: typeof err?.message === 'string' ? err.message : 'Internal error',
    ...(err?.data !== undefined ? { data: err.data } : {}),
  }
}

/** A response under the client's id (written out rather than copied with the id replaced: this is every call's path). */
function responseJson(message: JSONRPCMessage, clientId: RequestId): string {
  const m = message as { result?: unknown; error?: unknown }
  const body = m.error !== undefined ? `"error":${JSON.stringify(m.error)}` : `"result":${JSON.stringify(m.result)}`
  return `{"jsonrpc":"2.0","id":${JSON.stringify(clientId)},${body}}`
}

function write(ex: Exchange, chunk: string): void {
  if (ex.gone || ex.res.destroyed) return
  if (!ex.started) {
    ex.started = true
    ex.res.writeHead(200, Object.assign(ex.headers, SSE_HEADERS))
  }
  ex.res.write(chunk)
}

/**
 * Ends the stream with its last event. A stream that is all in one piece (the usual call:
 * no progress, one request) goes out as one write with a Content-Length.
 */
function end(ex: Exchange, last = ''): void {
  if (ex.gone || ex.res.destroyed) return
  ex.gone = true
  if (!ex.started) {
    const headers = Object.assign(ex.headers, SSE_HEADERS)
    headers['content-length'] = Buffer.byteLength(last)
    ex.res.writeHead(200, headers)
  }
  ex.res.end(last)
}
