import { BurrowError } from '../../core/errors.js'
import { JSON_RPC } from '../../core/protocol-numbers.js'
import { rpcError, type RpcError } from '../json-rpc-errors.js'
import type { EventEnvelope } from '../../core/events.js'
import type { CallContext, SessionOperations } from '../../core/session-service.js'
import { argumentsCheck } from '../request-validation.js'
import { RPC_METHODS } from './rpc-methods.js'

const checks = new Map(Object.entries(RPC_METHODS).map(([name, m]) => [name, argumentsCheck(m.params, 'params')]))

/** Notifications a streaming transport (stdio) sends during a turn: its events, and `queued` when it waits for the session. */
export type RpcNotify = {
  (method: 'event', params: EventEnvelope): void
  (method: 'queued', params: { session_id: string | undefined; position: number | null }): void
}

export type RpcResponse = { jsonrpc: '2.0'; id: string | number | null } & ({ result: unknown } | { error: RpcError })

export interface RpcCall {
  /** The caller's credential and request id (the transport's). */
  ctx: Omit<CallContext, 'idempotencyKey' | 'onEvent' | 'onQueued'>
  /** Where `event` notifications go while a turn runs (stdio); absent = no streaming. */
  notify?: RpcNotify | undefined
}

/**
 * Handles one JSON-RPC 2.0 payload (a request, a notification or a batch) against the
 * operations, whatever the transport. Returns what to send back: a response, an array of
 * responses, or undefined when nothing is owed (notifications only).
 */
export async function dispatch(ops: SessionOperations, payload: unknown, call: RpcCall): Promise<RpcResponse | RpcResponse[] | undefined> {
  if (Array.isArray(payload)) {
    if (payload.length === 0) return protocolError(null, JSON_RPC.INVALID_REQUEST, 'An empty batch is not a request.')
    const out = (await Promise.all(payload.map((p) => one(ops, p, call)))).filter((r): r is RpcResponse => r !== undefined)
    return out.length > 0 ? out : undefined
  }
  return one(ops, payload, call)
}

/** Parses a transport's raw text first (a parse error is still answered). */
export async function dispatchText(ops: SessionOperations, text: string, call: RpcCall): Promise<RpcResponse | RpcResponse[] | undefined> {
  let payload: unknown
  try {
    payload = JSON.parse(text)
  } catch (err) {
    return parseError(`Parse error: ${(err as Error).message}`)
  }
  return dispatch(ops, payload, call)
}

async function one(ops: SessionOperations, req: unknown, call: RpcCall): Promise<RpcResponse | undefined> {
  const r = req as { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown } | null
  const idOk =
    r !== null && typeof r === 'object' && (r.id === undefined || r.id === null || typeof r.id === 'string' || typeof r.id === 'number')
  const id = idOk && r && (typeof r.id === 'string' || typeof r.id === 'number') ? r.id : null
  if (!r || typeof r !== 'object' || r.jsonrpc !== '2.0' || typeof r.method !== 'string' || !idOk) {
    return protocolError(
      id,
      JSON_RPC.INVALID_REQUEST,
      'Not a JSON-RPC 2.0 request (needs jsonrpc "2.0", a string method and an optional id).',
    )
  }
  const isNotification = r.id === undefined
  const respond = (body: { result: unknown } | { error: RpcError }): RpcResponse | undefined =>
    isNotification ? undefined : { jsonrpc: '2.0', id, ...body }
  const params = r.params === undefined ? {} : r.params
  const p = params as { idempotency_key?: string; session_id?: string }
  const turnMethod = r.method === 'turn/start' || r.method === 'session/resume'
  const ctx: CallContext = {
    ...call.ctx,
    idempotencyKey: typeof p?.idempotency_key === 'string' ? p.idempotency_key : undefined,
    onEvent: call.notify && turnMethod ? (e) => call.notify!('event', e) : undefined,
    onQueued: call.notify && turnMethod ? (position) => call.notify!('queued', { session_id: p.session_id, position }) : undefined,
  }
  try {
    return respond({ result: await invoke(ops, r.method, params, ctx) })
  } catch (err) {
    return respond({ error: rpcError(err) })
  }
}

/**
 * Calls one method of the table: checks its params (naming the failing field, e.g.
 * `params/limit`) and runs it. Throws `BurrowError` only — `ROUTE_NOT_FOUND` for an unknown
 * method. The CLI calls the service through this too, so its checks are the RPC surface's.
 */
export async function invoke(ops: SessionOperations, name: string, params: unknown, ctx: CallContext): Promise<unknown> {
  const method = Object.hasOwn(RPC_METHODS, name) ? RPC_METHODS[name] : undefined
  if (!method) throw new BurrowError('ROUTE_NOT_FOUND', `No method ${name}.`)
  if (params === null || typeof params !== 'object' || Array.isArray(params)) {
    throw new BurrowError('INVALID_REQUEST', 'params must be an object of named parameters', { field: 'params' })
  }
  checks.get(name)!(params)
  return method.run(ops, params, ctx)
}

/** JSON-RPC's answer to a payload that is not JSON (-32700); `data.code` is the table's INVALID_REQUEST. */
export function parseError(message: string): RpcResponse {
  return protocolError(null, JSON_RPC.PARSE_ERROR, message)
}

function protocolError(id: string | number | null, code: number, message: string): RpcResponse {
  return { jsonrpc: '2.0', id, error: { code, message, data: { code: 'INVALID_REQUEST' } } }
}
