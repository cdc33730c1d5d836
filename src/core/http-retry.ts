/**
 * The one retry policy for Burrow's outbound HTTP calls (the LLM providers and the
 * embeddings endpoint): which answers and failures are worth another attempt, how long to
 * wait (exponential backoff with full jitter, or the server's `Retry-After`), when to give
 * up, and stopping the moment the caller's signal fires — the wait included.
 *
 * It lives in `core` because both `providers/` and `memory/` use it and may import only
 * `core`; it does no I/O of its own: each client hands in how to send one attempt and how
 * to turn a failure into its `BurrowError`.
 *
 * Written here rather than taken from a backoff library because it must honour
 * `Retry-After` and be interruptible mid-wait, and every client must agree on both.
 */

export interface RetryPolicy {
  /** Retries after the first attempt (0: one attempt only). */
  maxRetries: number
  /** Backoff before retry n (from 0): a uniform draw in [0, min(maxMs, baseMs · 2^n)). */
  baseMs: number
  /** Caps the backoff and any `Retry-After` wait. */
  maxMs: number
  /** Optional budget from the first attempt: a retry whose wait would end later is not made. */
  deadlineMs?: number | undefined
}

/** Statuses that mean "not now": request timeout, rate limit, server errors, Anthropic's 529 overloaded. */
export const RETRYABLE_STATUS: ReadonlySet<number> = new Set([408, 429, 500, 502, 503, 504, 529])

/**
 * Transport failures (an `error.code` or its cause's) that happen before the server has
 * answered, so sending again cannot act twice. Timeouts are deliberately absent: an attempt
 * that timed out has already spent the whole allowance, and retrying would multiply it.
 */
const RETRYABLE_ERROR_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
])

export function isRetryableStatus(status: number): boolean {
  return RETRYABLE_STATUS.has(status)
}

/** Whether a thrown transport error is worth another attempt (see `RETRYABLE_ERROR_CODES`). */
export function isRetryableError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  const cause = (err as { cause?: { code?: unknown } | null } | null)?.cause?.code
  return (typeof code === 'string' && RETRYABLE_ERROR_CODES.has(code)) || (typeof cause === 'string' && RETRYABLE_ERROR_CODES.has(cause))
}

/**
 * A `Retry-After` header in milliseconds from `now`: delay-seconds (fractions accepted) or
 * an HTTP-date; a date in the past is 0; anything else is `undefined` (ignored).
 */
export function retryAfterMs(header: string | readonly string[] | undefined, now = Date.now()): number | undefined {
  const v = (typeof header === 'string' ? header : header?.[0])?.trim()
  if (!v) return undefined
  const secs = Number(v)
  if (Number.isFinite(secs)) return Math.max(0, secs * 1000)
  const at = Date.parse(v)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

/**
 * The wait before retry `attempt` (0 for the first retry). Without `Retry-After`: full
 * jitter, `random · min(maxMs, baseMs · 2^attempt)`. With it: the server's delay (capped at
 * `maxMs`) plus a quarter of that jitter, so clients told the same instant do not all return
 * at once.
 */
export function backoffMs(policy: RetryPolicy, attempt: number, retryAfter: number | undefined, random: number = Math.random()): number {
  const jittered = random * Math.min(policy.maxMs, policy.baseMs * 2 ** attempt)
  return retryAfter === undefined ? jittered : Math.min(policy.maxMs, retryAfter) + jittered / 4
}

/** Resolves after `ms`, or rejects with `signal.reason` as soon as the signal fires; leaves no listener behind. */
export function sleepUnlessAborted(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason)
      return
    }
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal!.reason)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

/** What a retried request needs to see of an answer. */
export interface HttpAnswer {
  statusCode: number
  headers: Record<string, string | string[] | undefined>
}

export interface RetriedRequest<A extends HttpAnswer> {
  policy: RetryPolicy
  /** Interrupts everything: an attempt in flight, the wait between attempts, the next attempt. */
  signal?: AbortSignal | undefined
  /** Sends one attempt (`attempt` counts from 0); throws on a transport failure. */
  send(attempt: number): Promise<A>
  /** The error to throw for a transport failure that is not retried (or was the last). */
  failed(err: unknown): unknown
  /** The error to throw for a non-2xx answer that is not retried (or was the last); may read its body. */
  refused(answer: A): unknown
  /** Releases the body of a non-2xx answer before the wait for another attempt. */
  discard?(answer: A): Promise<void>
}

/**
 * Sends until an answer is 2xx, and returns that answer (its body untouched). A retryable
 * status (`RETRYABLE_STATUS`) or transport failure (`isRetryableError`) is tried again after
 * `backoffMs`, honouring `Retry-After`, while retries and the deadline last; anything else, or
 * the last failure, leaves through `refused` / `failed`. When `signal` fires the call rejects
 * with exactly `signal.reason`, whether it was sending or waiting.
 *
 * Retry happens only before an answer is accepted: a body that fails later is the caller's,
 * and is never replayed from here.
 */
export async function httpRetry<A extends HttpAnswer>(r: RetriedRequest<A>): Promise<A> {
  const { policy, signal } = r
  const started = Date.now()
  for (let attempt = 0; ; attempt++) {
    if (signal?.aborted) throw signal.reason
    let answer: A
    try {
      answer = await r.send(attempt)
    } catch (err) {
      if (signal?.aborted) throw signal.reason
      const wait = isRetryableError(err) ? waitFor(attempt, undefined) : undefined
      if (wait === undefined) throw r.failed(err)
      await sleepUnlessAborted(wait, signal)
      continue
    }
    if (answer.statusCode >= 200 && answer.statusCode < 300) return answer
    const wait = isRetryableStatus(answer.statusCode) ? waitFor(attempt, retryAfterMs(answer.headers['retry-after'])) : undefined
    if (wait === undefined) throw await r.refused(answer)
    await r.discard?.(answer)
    await sleepUnlessAborted(wait, signal)
  }

  /** The wait before another attempt, or `undefined` when the retries or the deadline are spent. */
  function waitFor(attempt: number, retryAfter: number | undefined): number | undefined {
    if (attempt >= policy.maxRetries) return undefined
    const ms = backoffMs(policy, attempt, retryAfter)
    if (policy.deadlineMs !== undefined && Date.now() - started + ms > policy.deadlineMs) return undefined
    return ms
  }
}
