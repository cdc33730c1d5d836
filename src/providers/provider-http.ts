import { Agent, errors as undiciErrors, request, type Dispatcher } from 'undici'
import { BurrowError } from '../core/errors.js'
import { httpRetry, type RetryPolicy } from '../core/http-retry.js'
import { injectTrace, type TraceContext } from '../core/tracing.js'

export interface ProviderHttpOptions {
  /** Time allowed for response headers, per attempt. */
  headersTimeoutMs: number
  /** Longest silence allowed between body chunks once streaming. */
  idleTimeoutMs: number
  connectTimeoutMs: number
  /** Retries after the first attempt, for the failures `core/http-retry.ts` retries, before any byte of the body. */
  maxRetries: number
  retryBaseMs: number
  retryMaxMs: number
}

/**
 * Statuses by which a provider refuses the request itself (a malformed or unacceptable input,
 * content it will not take, a body too large): sending the same history again fails again.
 * Marked `data.rejected`; auth errors (401/403) and rate limits are about the caller, not the input.
 */
const REJECTED_STATUS = new Set([400, 413, 422])

export type ProviderResponse = Dispatcher.ResponseData

/**
 * The one undici dispatcher every provider shares (keep-alive pool), with retry before the
 * first byte only (`core/http-retry.ts` decides what is retried and how long to wait): a
 * stream that has started is never replayed. Errors leave as `BurrowError`
 * (`PROVIDER_ERROR` / `PROVIDER_TIMEOUT`); an interrupted call rejects with the signal's reason.
 */
export class ProviderHttp {
  readonly dispatcher: Agent
  private readonly policy: RetryPolicy

  constructor(readonly opts: ProviderHttpOptions) {
    this.dispatcher = new Agent({
      connect: { timeout: opts.connectTimeoutMs },
      headersTimeout: opts.headersTimeoutMs,
      bodyTimeout: opts.idleTimeoutMs,
      keepAliveTimeout: 10_000,
    })
    this.policy = { maxRetries: opts.maxRetries, baseMs: opts.retryBaseMs, maxMs: opts.retryMaxMs }
  }

  /**
   * POSTs JSON and returns a 2xx response whose body is still unread. With `trace` (the LLM
   * call's span), the request carries W3C `traceparent` / `tracestate` naming it as the parent.
   */
  async postJson(
    provider: string,
    url: string,
    headers: Record<string, string>,
    body: unknown,
    signal?: AbortSignal,
    describeError: (status: number, text: string) => string = defaultDescribe,
    trace?: TraceContext,
  ): Promise<ProviderResponse> {
    const payload = JSON.stringify(body)
    const sent: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }
    injectTrace(trace, sent)
    return httpRetry<ProviderResponse>({
      policy: this.policy,
      signal,
      send: () =>
        request(url, {
          method: 'POST',
          dispatcher: this.dispatcher,
          signal,
          headers: sent,
          body: payload,
        }),
      failed: (err) => mapNetworkError(provider, err),
      refused: async (res) => {
        const text = await res.body.text().catch(() => '')
        return new BurrowError('PROVIDER_ERROR', `${provider} answered HTTP ${res.statusCode}: ${describeError(res.statusCode, text)}`, {
          provider,
          status: res.statusCode,
          ...(REJECTED_STATUS.has(res.statusCode) ? { rejected: true } : {}),
        })
      },
      discard: (res) =>
        res.body.text().then(
          () => undefined,
          () => undefined,
        ),
    })
  }

  close(): Promise<void> {
    return this.dispatcher.close()
  }
}

/** Maps an error thrown while a response body streams (after the first byte). */
export function mapStreamError(provider: string, err: unknown, signal?: AbortSignal): unknown {
  if (signal?.aborted) return signal.reason
  if (err instanceof BurrowError) return err
  return mapNetworkError(provider, err)
}

function mapNetworkError(provider: string, err: unknown): BurrowError {
  if (
    err instanceof undiciErrors.HeadersTimeoutError ||
    err instanceof undiciErrors.BodyTimeoutError ||
    err instanceof undiciErrors.ConnectTimeoutError
  ) {
    return new BurrowError('PROVIDER_TIMEOUT', `${provider} did not answer in time (${(err as Error).message}).`, { provider })
  }
  const message = err instanceof Error ? err.message : String(err)
  return new BurrowError('PROVIDER_ERROR', `${provider} connection failed: ${message}`, { provider })
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
