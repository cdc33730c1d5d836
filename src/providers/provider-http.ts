import { Agent, errors as undiciErrors, request, type Dispatcher } from 'undici'
import { BurrowError } from '../core/errors.js'

export interface ProviderHttpOptions {
  /** Time allowed for response headers, per attempt. */
  headersTimeoutMs: number
  /** Longest silence allowed between body chunks once streaming. */
  idleTimeoutMs: number
  connectTimeoutMs: number
  /** Retries after the first attempt, for 429/5xx/connection errors before any byte of the body. */
  maxRetries: number
  retryBaseMs: number
  retryMaxMs: number
}

const RETRYABLE_STATUS = new Set([408, 429, 500, 502, 503, 504, 529])
/**
 * Statuses by which a provider refuses the request itself (a malformed or unacceptable input,
 * content it will not take, a body too large): sending the same history again fails again.
 * Marked `data.rejected`; auth errors (401/403) and rate limits are about the caller, not the input.
 */
const REJECTED_STATUS = new Set([400, 413, 422])
const RETRYABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT'])

export type ProviderResponse = Dispatcher.ResponseData

/**
 * The one undici dispatcher every provider shares (keep-alive pool), with retry
 * before the first byte only: a stream that has started is never replayed.
 * Errors leave as `BurrowError` (`PROVIDER_ERROR` / `PROVIDER_TIMEOUT`).
 *
 * Retry is written here rather than taken from a backoff library because it must
 * honour `Retry-After` and stop sleeping the moment the turn is interrupted.
 */
export class ProviderHttp {
  readonly dispatcher: Agent

  constructor(readonly opts: ProviderHttpOptions) {
    this.dispatcher = new Agent({
      connect: { timeout: opts.connectTimeoutMs },
      headersTimeout: opts.headersTimeoutMs,
      bodyTimeout: opts.idleTimeoutMs,
      keepAliveTimeout: 10_000,
    })
  }

  /** POSTs JSON and returns a 2xx response whose body is still unread. */
  async postJson(provider: string, url: string, headers: Record<string, string>, body: unknown, signal?: AbortSignal,
    describeError: (status: number, text: string) => string = defaultDescribe): Promise<ProviderResponse> {
    const payload = JSON.stringify(body)
    for (let attempt = 0; ; attempt++) {
      if (signal?.aborted) throw signal.reason
      let res: ProviderResponse
      try {
        res = await request(url, {
          method: 'POST', dispatcher: this.dispatcher, signal,
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
          body: payload,
        })
      } catch (err) {
        if (signal?.aborted) throw signal.reason
        const mapped = mapNetworkError(provider, err)
        if (mapped.retryable && attempt < this.opts.maxRetries) { await this.backoff(attempt, undefined, signal); continue }
        throw mapped.error
      }
      if (res.statusCode >= 200 && res.statusCode < 300) return res
      const text = await res.body.text().catch(() => '')
      if (RETRYABLE_STATUS.has(res.statusCode) && attempt < this.opts.maxRetries) {
        await this.backoff(attempt, retryAfterMs(res.headers['retry-after']), signal)
        continue
      }
      throw new BurrowError('PROVIDER_ERROR', `${provider} answered HTTP ${res.statusCode}: ${describeError(res.statusCode, text)}`,
        { provider, status: res.statusCode, ...(REJECTED_STATUS.has(res.statusCode) ? { rejected: true } : {}) })
    }
  }

  private backoff(attempt: number, retryAfter: number | undefined, signal?: AbortSignal): Promise<void> {
    const exp = Math.min(this.opts.retryMaxMs, this.opts.retryBaseMs * 2 ** attempt)
    const jittered = Math.random() * exp // full jitter
    const ms = retryAfter !== undefined ? Math.min(this.opts.retryMaxMs, retryAfter) + jittered / 4 : jittered
    return sleep(ms, signal)
  }

  close(): Promise<void> {
    return this.dispatcher.close()
  }
}

/** Maps an error thrown while a response body streams (after the first byte). */
export function mapStreamError(provider: string, err: unknown, signal?: AbortSignal): unknown {
  if (signal?.aborted) return signal.reason
  if (err instanceof BurrowError) return err
  return mapNetworkError(provider, err).error
}

function mapNetworkError(provider: string, err: unknown): { error: BurrowError; retryable: boolean } {
  if (err instanceof undiciErrors.HeadersTimeoutError || err instanceof undiciErrors.BodyTimeoutError ||
      err instanceof undiciErrors.ConnectTimeoutError) {
    return { error: new BurrowError('PROVIDER_TIMEOUT', `${provider} did not answer in time (${(err as Error).message}).`, { provider }), retryable: false }
  }
  const code = (err as { code?: string } | null)?.code ?? ''
  const cause = (err as { cause?: { code?: string } } | null)?.cause?.code ?? ''
  const retryable = RETRYABLE_CODES.has(code) || RETRYABLE_CODES.has(cause)
  const message = err instanceof Error ? err.message : String(err)
  return { error: new BurrowError('PROVIDER_ERROR', `${provider} connection failed: ${message}`, { provider }), retryable }
}

function retryAfterMs(h: string | string[] | undefined): number | undefined {
  const v = Array.isArray(h) ? h[0] : h
  if (!v) return undefined
  const secs = Number(v)
  if (Number.isFinite(secs)) return Math.max(0, secs * 1000)
  const at = Date.parse(v)
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now())
}

function defaultDescribe(_status: number, text: string): string {
  try {
    const j = JSON.parse(text) as { error?: { message?: string } | string; message?: string }
    if (typeof j.error === 'string') return j.error
    return j.error?.message ?? j.message ?? text.slice(0, 500)
  } catch {
    return text.slice(0, 500) || '(empty body)'
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) { reject(signal.reason); return }
    const t = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve() }, ms)
    const onAbort = () => { clearTimeout(t); reject(signal!.reason) }
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
