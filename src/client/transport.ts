/**
 * The HTTP plumbing of the typed client: headers from a call context, timeouts, and
 * the one mapping from what went wrong on the wire to a `BurrowError`.
 *
 * Error mapping (documented for users):
 * - a problem+json body with a known `code` → that code, `detail` as the message, and
 *   `data` = the problem's `data` plus `field` and `request_id` when present;
 * - a problem with a code this client does not know (a newer server) → `INTERNAL`
 *   with the original code in `data.code`;
 * - any other non-2xx answer (a proxy's HTML page, …) → `INTERNAL` with `data.status`;
 * - no answer at all → `INTERNAL` with `data.transport` = `'network'` (connection refused
 *   or reset), `'timeout'` (`timeoutMs` elapsed) or `'stream'` (a turn stream ended before
 *   the turn did). The code table has no "unreachable" code, and these are not server
 *   verdicts: the request may or may not have taken effect, so retry it with the same
 *   `Idempotency-Key`. `cause` keeps the underlying error.
 */
import { BurrowError, isErrorCode } from '../core/errors.js'
import type { CallContext } from '../core/session-service.js'

/** A `fetch`-compatible function (the global one by default; inject one for tests or proxies). */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>

export interface BurrowClientOptions {
  /** The server's origin, e.g. `http://127.0.0.1:8080` (a trailing `/` is ignored). */
  baseUrl: string
  /** Bearer token sent on every call; `ctx.apiKey` overrides it per call. */
  apiKey?: string | undefined
  fetch?: FetchLike | undefined
  /**
   * Bound on a whole call (including a streamed turn) in ms; none by default. Not applied
   * to `events()` streams, which are meant to stay open.
   */
  timeoutMs?: number | undefined
}

/** What a client call may carry: every field of the service's CallContext, all optional. */
export type ClientCallContext = Partial<CallContext>

export interface SendOptions {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  path: string
  query?: Record<string, string | number | boolean | undefined> | undefined
  body?: unknown
  accept?: string | undefined
  headers?: Record<string, string> | undefined
  /** Overrides the client's default timeout (`null`: none). */
  timeoutMs?: number | null | undefined
  signal?: AbortSignal | undefined
}

export class Transport {
  readonly baseUrl: string
  private readonly fetchFn: FetchLike

  constructor(readonly opts: BurrowClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '')
    this.fetchFn = opts.fetch ?? ((input, init) => fetch(input, init))
  }

  url(path: string, query?: SendOptions['query']): string {
    const qs = new URLSearchParams()
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) qs.set(k, String(v))
    const s = qs.toString()
    return `${this.baseUrl}${path}${s ? `?${s}` : ''}`
  }

  headers(ctx: ClientCallContext, extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { ...extra }
    const key = ctx.apiKey ?? this.opts.apiKey
    if (key) h.authorization = `Bearer ${key}`
    if (ctx.idempotencyKey) h['idempotency-key'] = ctx.idempotencyKey
    if (ctx.requestId) h['x-request-id'] = ctx.requestId
    return h
  }

  /** The bare fetch (for streams that handle their own answers). */
  raw(url: string, init: RequestInit): Promise<Response> {
    return this.fetchFn(url, init)
  }

  /** Sends a request; resolves with a 2xx response, throws `BurrowError` for anything else. */
  async send(ctx: ClientCallContext, o: SendOptions): Promise<Response> {
    const headers = this.headers(ctx, { accept: o.accept ?? 'application/json', ...o.headers })
    let body: string | undefined
    if (o.body !== undefined) {
      body = JSON.stringify(o.body)
      headers['content-type'] = 'application/json'
    }
    const timeoutMs = o.timeoutMs === undefined ? this.opts.timeoutMs : (o.timeoutMs ?? undefined)
    const signals = [o.signal, timeoutMs ? AbortSignal.timeout(timeoutMs) : undefined].filter((s): s is AbortSignal => s !== undefined)
    const signal = signals.length === 0 ? undefined : signals.length === 1 ? signals[0] : AbortSignal.any(signals)
    let res: Response
    try {
      res = await this.fetchFn(this.url(o.path, o.query), { method: o.method, headers, body, signal })
    } catch (err) {
      throw transportError(err, o.method, o.path, timeoutMs)
    }
    if (res.ok) return res
    throw await responseError(res)
  }

  /** `send`, then the JSON body (undefined for an empty one). */
  async json<T>(ctx: ClientCallContext, o: SendOptions): Promise<T> {
    const res = await this.send(ctx, o)
    let text: string
    try {
      text = await res.text()
    } catch (err) {
      throw transportError(err, o.method, o.path, this.opts.timeoutMs)
    }
    if (text.length === 0) return undefined as T
    try {
      return JSON.parse(text) as T
    } catch (err) {
      throw new BurrowError(
        'INTERNAL',
        `${o.method} ${o.path} answered ${res.status} with a body that is not JSON.`,
        { status: res.status, transport: 'protocol' },
        { cause: err },
      )
    }
  }
}

/** The `BurrowError` of a non-2xx response (see the mapping at the top of this file). */
export async function responseError(res: Response): Promise<BurrowError> {
  const text = await res.text().catch(() => '')
  let p: Record<string, unknown> | undefined
  try {
    const parsed: unknown = JSON.parse(text)
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) p = parsed as Record<string, unknown>
  } catch {
    /* not JSON */
  }
  if (p && typeof p.code === 'string') return problemError(p, res.status)
  return new BurrowError('INTERNAL', `The server answered HTTP ${res.status} without a problem body.`, {
    status: res.status,
    transport: 'http',
    body: text.slice(0, 500),
  })
}

/** A problem document (or a `turn_failed`-like `{ code, message }`) as a BurrowError. */
export function problemError(p: Record<string, unknown>, status?: number): BurrowError {
  const data: Record<string, unknown> = p.data && typeof p.data === 'object' ? { ...(p.data as Record<string, unknown>) } : {}
  if (typeof p.field === 'string') data.field = p.field
  if (typeof p.request_id === 'string') data.request_id = p.request_id
  const message = typeof p.detail === 'string' ? p.detail : typeof p.message === 'string' ? p.message : undefined
  if (isErrorCode(p.code)) return new BurrowError(p.code, message, Object.keys(data).length > 0 ? data : undefined)
  return new BurrowError('INTERNAL', message, { ...data, code: p.code, ...(status !== undefined ? { status } : {}) })
}

/** A failure to get (or finish reading) an answer at all. */
export function transportError(err: unknown, method: string, path: string, timeoutMs?: number): BurrowError {
  if (err instanceof BurrowError) return err
  const name = (err as { name?: unknown } | null)?.name
  if (name === 'TimeoutError') {
    return new BurrowError(
      'INTERNAL',
      `${method} ${path} did not complete within ${timeoutMs} ms.`,
      { transport: 'timeout', timeout_ms: timeoutMs },
      { cause: err },
    )
  }
  const reason = (err as { cause?: { code?: unknown; message?: unknown } } | null)?.cause
  const detail = typeof reason?.code === 'string' ? reason.code : err instanceof Error ? err.message : String(err)
  return new BurrowError('INTERNAL', `${method} ${path} got no complete answer (${detail}).`, { transport: 'network' }, { cause: err })
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve()
      return
    }
    const timer = setTimeout(done, ms)
    function done(): void {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    signal?.addEventListener('abort', done, { once: true })
  })
}
