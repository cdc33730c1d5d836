/**
 * Stateless MCP streamable HTTP for one long-lived MCP server: a Transport (the SDK's
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
 * The checks of the SDK's transport are kept, answered from the one code table (every error
 * carries `data.code`; see mcp-errors.ts): Accept must list application/json and
 * text/event-stream, the body is JSON-RPC messages (-32600 otherwise: -32700 is for a body
 * that is not JSON), an initialize request comes alone (-32600), an unknown
 * MCP-Protocol-Version is refused (all 400 INVALID_REQUEST); a POST of notifications and
 * responses only is answered 202. A request the SDK would drop unanswered (its own check of
 * the envelope fails, e.g. `_meta` that is not an object) is answered -32600 here.
 *
 * A plain `tools/call` (params: name, arguments, _meta) goes straight to the server's own
 * tools/call handler (`toolCall`), without the SDK's generic request path (its zod checks of
 * the message, the request and the result cost more than the rest of the call): the same
 * handler, the same result, the same progress notifications. It answers on its own POST's
 * stream, so it needs no id mapping: only requests that take the SDK's path (every other
 * message, and a tools/call with anything more) are given an internal id.
 *
 * Stateless means a client's `notifications/cancelled` names an id of its own that the
 * server cannot tell from another client's: cancellations are acknowledged and dropped
 * (a cancelled call's turn runs on, as it does when the client disconnects).
 */
import type { ServerResponse } from 'node:http'
import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js'
import {
  isJSONRPCRequest,
  SUPPORTED_PROTOCOL_VERSIONS,
  type JSONRPCMessage,
  type MessageExtraInfo,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js'
import { BurrowError, ERROR_TABLE, type ErrorCode } from '../../core/errors.js'
import { JSON_RPC } from '../../core/protocol-numbers.js'
import { rpcError } from '../json-rpc-errors.js'
import { tableError } from './mcp-errors.js'
import type { Extra, McpToolCall } from './mcp-server.js'
import type { TraceContext } from '../../core/tracing.js'

/** What a tool call learns of the HTTP request that carried it. */
export interface ExchangeContext {
  apiKey: string | undefined
  requestId: string
  /** The request's span (tracing on). */
  trace?: TraceContext | undefined
}

/** One POST: its response stream and how many of its requests are still unanswered. */
interface Exchange {
  res: ServerResponse
  ctx: ExchangeContext
  headers: Record<string, string | number | string[]>
  unanswered: number
}

/** A request that took the SDK's path, under its internal id: where and under which id to answer it. */
interface Routed {
  ex: Exchange
  clientId: RequestId
}

/** An HTTP-level refusal: a JSON-RPC error with id null, under its table row's HTTP status. */
export interface Refusal {
  status: number
  code: number
  message: string
  burrowCode: ErrorCode
  field?: string
}

/** A refusal of the table's row `code`; `rpc` is JSON-RPC's own number where one fits better (-32600). */
function refusal(code: ErrorCode, message: string, opts: { rpc?: number; field?: string } = {}): Refusal {
  return {
    status: ERROR_TABLE[code].http,
    code: opts.rpc ?? ERROR_TABLE[code].rpc,
    message,
    burrowCode: code,
    ...(opts.field ? { field: opts.field } : {}),
  }
}

const MAX_BATCH = 100

const isId = (v: unknown) => typeof v === 'string' || (typeof v === 'number' && Number.isInteger(v))
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/** The signal of a direct call: nothing cancels it (see above). */
const NEVER = new AbortController().signal

type PlainToolCall = { name: string; arguments?: Record<string, unknown>; _meta?: Record<string, unknown> }

/**
 * tools/call params with nothing but a name, arguments and _meta (a valid progressToken at
 * most): what the direct path serves. Anything else takes the SDK's path and its checks.
 */
function isPlainToolCall(p: unknown): p is PlainToolCall {
  if (!isObject(p) || typeof p.name !== 'string') return false
  for (const k in p) if (k !== 'name' && k !== 'arguments' && k !== '_meta') return false
  if (p._meta !== undefined) {
    if (!isObject(p._meta)) return false
    for (const k in p._meta) if (k !== 'progressToken') return false
    if (p._meta.progressToken !== undefined && !isId(p._meta.progressToken)) return false
  }
  return p.arguments === undefined || isObject(p.arguments)
}

/**
 * The shape of a JSON-RPC 2.0 message: a request (method, id), a notification (method) or a
 * response (id, result or error). The server validates each method's params against its own
 * schema (the SDK's, and each tool's), so the envelope is all that is checked here.
 */
function isMessage(m: unknown): m is JSONRPCMessage {
  if (!isObject(m) || m.jsonrpc !== '2.0') return false
  if ('method' in m) return typeof m.method === 'string' && (!('id' in m) || isId(m.id)) && (m.params === undefined || isObject(m.params))
  return isId(m.id) && ('result' in m && isObject(m.result)) !== ('error' in m && isObject(m.error))
}

const isRequest = (m: JSONRPCMessage): m is JSONRPCMessage & { id: RequestId; method: string } => 'method' in m && 'id' in m

export class HttpMuxTransport implements Transport {
  onclose?: (() => void) | undefined
  onerror?: ((error: Error) => void) | undefined
  onmessage?: (<T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void) | undefined

  /** The server's tools/call handler (toolCallOf(server)), for the direct path; without it every call takes the SDK's. */
  toolCall: McpToolCall | undefined
  /** Hears errors that reach clients as INTERNAL (without detail). */
  onInternalError: ((err: unknown) => void) | undefined
  private next = 0
  /** Requests on the SDK's path, by internal id. */
  private readonly routed = new Map<number, Routed>()
  private closed = false

  async start(): Promise<void> {}

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    // Streams waiting on the SDK's path end now; a direct call's stream ends with its answer (the
    // service finishes or interrupts running turns before the server closes). No registry of
    // POSTs is kept for that: the usual POST touches no long-lived collection (with a Set of open
    // POSTs, surface-overhead measured 1.2–1.7× REST's CPU per turn against 1.2–1.3× without).
    for (const r of this.routed.values()) end(r.ex)
    this.routed.clear()
    this.onclose?.()
  }

  /** The context of the POST that carried a request: on a direct call's extra, or found by the SDK path's internal id. */
  context(extra: { requestId: RequestId }): ExchangeContext | undefined {
    const own = (extra as { exchange?: ExchangeContext }).exchange
    return own ?? (typeof extra.requestId === 'number' ? this.routed.get(extra.requestId)?.ex.ctx : undefined)
  }

  /**
   * Takes one POST: checks it, then hands its messages to the server. Returns a refusal to
   * answer as JSON instead, or null once the response is under way (the transport ends it).
   */
  handle(
    body: unknown,
    accept: string | undefined,
    protocolVersion: string | undefined,
    res: ServerResponse,
    ctx: ExchangeContext,
    headers: Record<string, string | number | string[]>,
  ): Refusal | null {
    if (this.closed) return refusal('SHUTTING_DOWN', ERROR_TABLE.SHUTTING_DOWN.message)
    if (!accept?.includes('application/json') || !accept.includes('text/event-stream')) {
      return refusal('INVALID_REQUEST', 'Not Acceptable: Client must accept both application/json and text/event-stream', {
        field: 'header/accept',
      })
    }
    const messages: unknown[] = Array.isArray(body) ? body : [body]
    if (messages.length === 0 || messages.length > MAX_BATCH) {
      return refusal('INVALID_REQUEST', `Invalid Request: a batch holds 1 to ${MAX_BATCH} messages`, {
        rpc: JSON_RPC.INVALID_REQUEST,
        field: 'body',
      })
    }
    let initialize = false
    let requests = 0
    for (const [i, m] of messages.entries()) {
      if (!isMessage(m)) {
        return refusal('INVALID_REQUEST', 'Invalid Request: not a JSON-RPC 2.0 message', {
          rpc: JSON_RPC.INVALID_REQUEST,
          field: Array.isArray(body) ? `body/${i}` : 'body',
        })
      }
      if (isRequest(m)) {
        requests++
        if (m.method === 'initialize') initialize = true
      }
    }
    if (initialize && messages.length > 1) {
      return refusal('INVALID_REQUEST', 'Invalid Request: Only one initialization request is allowed', {
        rpc: JSON_RPC.INVALID_REQUEST,
        field: 'body',
      })
    }
    if (!initialize && protocolVersion !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.includes(protocolVersion)) {
      return refusal(
        'INVALID_REQUEST',
        `Bad Request: Unsupported protocol version: ${protocolVersion} (supported versions: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`,
        { field: 'header/mcp-protocol-version' },
      )
    }

    if (requests === 0) res.writeHead(202, headers).end()
    // Every request is counted before any is dispatched, so none can end the stream early.
    const ex: Exchange = { res, ctx, headers, unanswered: requests }
    for (const m of messages as JSONRPCMessage[]) {
      if (!('method' in m)) continue // a response to a server request: stateless, the server sends none
      if (!isRequest(m)) {
        if (m.method !== 'notifications/cancelled') this.onmessage?.(m) // cancelled: another client's id space, see above
      } else if (this.toolCall && m.method === 'tools/call' && isPlainToolCall(m.params)) {
        this.direct(this.toolCall, ex, m.id, m.params)
      } else if (!isJSONRPCRequest(m as unknown)) {
        // The SDK drops a request its own envelope check refuses, leaving it unanswered.
        const e = new BurrowError(
          'INVALID_REQUEST',
          'Invalid Request: params._meta must be an object, its progressToken a string or an integer.',
          { field: 'params/_meta' },
        )
        this.answer(ex, responseJson(m.id, 'error', rpcError(e, JSON_RPC.INVALID_REQUEST)))
      } else {
        const id = ++this.next
        this.routed.set(id, { ex, clientId: m.id })
        this.onmessage?.({ ...m, id })
      }
    }
    return null
  }

  /** A tools/call through the server's handler, answered on its POST's stream (errors mapped onto the code table). */
  private direct(toolCall: McpToolCall, ex: Exchange, clientId: RequestId, params: PlainToolCall): void {
    const extra = {
      signal: NEVER,
      requestId: ++this.next,
      _meta: params._meta,
      sessionId: undefined,
      exchange: ex.ctx,
      sendNotification: async (n: { method: string; params?: unknown }) => {
        write(ex, JSON.stringify({ ...n, jsonrpc: '2.0' }))
      },
      sendRequest: refuseRequest,
    } as unknown as Extra
    toolCall(params, extra)
      .then(
        (result) => this.answer(ex, responseJson(clientId, 'result', result)),
        (err: unknown) => this.answer(ex, responseJson(clientId, 'error', tableError(err, this.onInternalError))),
      )
      .catch((err: unknown) => this.onerror?.(err as Error))
  }

  /** What the SDK's Protocol sends: responses to routed requests (under the client's id) and their notifications. */
  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const isResponse = 'id' in message && !('method' in message)
    const internal = isResponse ? (message as { id: RequestId }).id : options?.relatedRequestId
    const r = typeof internal === 'number' ? this.routed.get(internal) : undefined
    // Messages of no POST (server-initiated requests, notifications unrelated to a request) have no stream to go to.
    if (!r) return
    if (!isResponse) return write(r.ex, JSON.stringify(message))
    this.routed.delete(internal as number)
    const m = message as { result?: unknown; error?: unknown }
    this.answer(
      r.ex,
      m.error !== undefined
        ? responseJson(r.clientId, 'error', tableError(m.error, this.onInternalError))
        : responseJson(r.clientId, 'result', m.result),
    )
  }

  /** One answer on a POST's stream; the last one ends it. */
  private answer(ex: Exchange, json: string): void {
    if (--ex.unanswered > 0) write(ex, json)
    else end(ex, json)
  }
}

const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }

const refuseRequest = () => Promise.reject(new Error('stateless HTTP: the server sends no requests'))

/** A response under the client's id, written out (this is every call's path). */
function responseJson(clientId: RequestId, kind: 'result' | 'error', value: unknown): string {
  return `{"jsonrpc":"2.0","id":${JSON.stringify(clientId)},"${kind}":${JSON.stringify(value)}}`
}

/**
 * One SSE event (a JSON-RPC message). A response whose client went away is dropped: the
 * response is destroyed then (its turn runs on, as on REST).
 */
function write(ex: Exchange, json: string): void {
  const res = ex.res
  if (res.destroyed || res.writableEnded) return
  if (!res.headersSent) res.writeHead(200, Object.assign(ex.headers, SSE_HEADERS))
  res.write(`event: message\ndata: ${json}\n\n`)
}

/**
 * Ends the stream, with its last event if any. A stream that is all in one piece (the usual
 * call: no progress, one request) goes out as one write with a Content-Length.
 */
function end(ex: Exchange, json?: string): void {
  const res = ex.res
  if (res.destroyed || res.writableEnded) return
  const last = json === undefined ? '' : `event: message\ndata: ${json}\n\n`
  if (!res.headersSent) {
    const headers = Object.assign(ex.headers, SSE_HEADERS)
    headers['content-length'] = Buffer.byteLength(last)
    res.writeHead(200, headers)
  }
  res.end(last)
}
