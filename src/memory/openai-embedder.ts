import { Agent, errors as undiciErrors, request, type Dispatcher } from 'undici'
import { BurrowError } from '../core/errors.js'
import { httpRetry, type RetryPolicy } from '../core/http-retry.js'
import type { Embedder } from '../core/memory-store.js'

export interface OpenAiEmbedderOptions {
  /**
   * `BURROW_EMBEDDINGS_URL`: an OpenAI-compatible API base such as `https://api.openai.com/v1`
   * or `http://host:11434/v1` (requests go to `{base}/embeddings`); a bare origin means
   * `{origin}/v1/embeddings`, and a URL already ending in `/embeddings` is used as it is.
   */
  baseUrl: string
  /** `BURROW_EMBEDDINGS_MODEL`. */
  model: string
  /** Sent as `Authorization: Bearer …` when set. */
  apiKey?: string | undefined
  /** Inputs per request, 1–2048 (default 256). */
  batchSize?: number
  /** Time allowed for one attempt, response headers and body (default 60 s). */
  timeoutMs?: number
  /** Retries after the first attempt, for the failures `core/http-retry.ts` retries (default 2). */
  maxRetries?: number
  /** Backoff: full jitter up to `retryBaseMs · 2^attempt`, capped at `retryMaxMs` (defaults 500 ms, 8 s). */
  retryBaseMs?: number
  retryMaxMs?: number
  /** A dispatcher to share (e.g. a keep-alive pool); without one the embedder owns one, closed by `close()`. */
  dispatcher?: Dispatcher
}

const PROVIDER = 'embeddings'

/**
 * Embeddings from an OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, Ollama, vLLM,
 * LM Studio…). Texts go in batches, one request at a time and in order; vectors come back
 * L2-normalised. `dimensions` is learned from the first response (`init()` probes for it)
 * and every later response must match it. Errors leave as `BurrowError`:
 * `PROVIDER_NOT_CONFIGURED` (no model, bad URL), `PROVIDER_TIMEOUT`, `PROVIDER_ERROR`
 * (HTTP errors with the server's message, connection failures, malformed responses).
 */
export class OpenAiEmbedder implements Embedder {
  readonly id: string
  readonly url: string
  private dims = 0
  private readonly batchSize: number
  private readonly timeoutMs: number
  private readonly policy: RetryPolicy
  private readonly dispatcher: Dispatcher
  private readonly ownsDispatcher: boolean

  constructor(private readonly opts: OpenAiEmbedderOptions) {
    if (!opts.model?.trim())
      throw new BurrowError('PROVIDER_NOT_CONFIGURED', 'No embeddings model is configured (BURROW_EMBEDDINGS_MODEL).', {
        provider: PROVIDER,
      })
    this.url = embeddingsUrl(opts.baseUrl)
    this.id = `openai:${opts.model}@${new URL(this.url).host}`
    this.batchSize = intIn('batchSize', opts.batchSize ?? 256, 1, 2048)
    this.timeoutMs = intIn('timeoutMs', opts.timeoutMs ?? 60_000, 1, 3_600_000)
    this.policy = {
      maxRetries: intIn('maxRetries', opts.maxRetries ?? 2, 0, 10),
      baseMs: intIn('retryBaseMs', opts.retryBaseMs ?? 500, 0, 60_000),
      maxMs: intIn('retryMaxMs', opts.retryMaxMs ?? 8_000, 0, 300_000),
    }
    this.ownsDispatcher = opts.dispatcher === undefined
    this.dispatcher =
      opts.dispatcher ??
      new Agent({
        connect: { timeout: Math.min(this.timeoutMs, 10_000) },
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
        keepAliveTimeout: 10_000,
      })
  }

  /** The vector length; 0 until the first response (see `init()`). */
  get dimensions(): number {
    return this.dims
  }

  /** Learns `dimensions` with one short request, if not known yet. */
  async init(signal?: AbortSignal): Promise<this> {
    if (this.dims === 0) await this.embed(['dimension probe'], signal)
    return this
  }

  /** One unit vector per text, in order. Empty texts are sent as one space (the API rejects ''). */
  async embed(texts: readonly string[], signal?: AbortSignal): Promise<number[][]> {
    const out: number[][] = []
    for (let i = 0; i < texts.length; i += this.batchSize) {
      const batch = texts.slice(i, i + this.batchSize).map((s) => (s === '' ? ' ' : s))
      out.push(...(await this.request(batch, signal)))
    }
    return out
  }

  /** Closes the dispatcher if the embedder made it. */
  async close(): Promise<void> {
    if (this.ownsDispatcher) await this.dispatcher.close()
  }

  private async request(input: string[], signal?: AbortSignal): Promise<number[][]> {
    const payload = JSON.stringify({ model: this.opts.model, input, encoding_format: 'float' })
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' }
    if (this.opts.apiKey) headers.authorization = `Bearer ${this.opts.apiKey}`
    const answer = await httpRetry({
      policy: this.policy,
      signal,
      // One attempt, body included, within timeoutMs; the whole body is read here because the
      // vectors are only usable once complete.
      send: async () => {
        const timeout = AbortSignal.timeout(this.timeoutMs)
        try {
          const res = await request(this.url, {
            method: 'POST',
            dispatcher: this.dispatcher,
            headers,
            body: payload,
            signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
          })
          return { statusCode: res.statusCode, headers: res.headers, text: await res.body.text() }
        } catch (err) {
          if (timeout.aborted && !signal?.aborted) throw this.timedOut()
          throw err
        }
      },
      failed: (err) => this.mapNetworkError(err),
      refused: (res) =>
        new BurrowError('PROVIDER_ERROR', `The embeddings endpoint answered HTTP ${res.statusCode}: ${describe(res.text)}`, {
          provider: PROVIDER,
          status: res.statusCode,
        }),
    })
    return this.parse(answer.text, input.length)
  }

  /** Checks an OpenAI embeddings response and returns its vectors in input order, normalised. */
  private parse(text: string, count: number): number[][] {
    const bad = (why: string) =>
      new BurrowError('PROVIDER_ERROR', `The embeddings endpoint sent a malformed response: ${why}.`, { provider: PROVIDER })
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      throw bad('not JSON')
    }
    const data = (body as { data?: unknown } | null)?.data
    if (!Array.isArray(data)) throw bad('no data array')
    if (data.length !== count) throw bad(`${data.length} embeddings for ${count} inputs`)
    const byIndex = data.every((d) => Number.isInteger((d as { index?: unknown } | null)?.index))
    const out = new Array<number[] | undefined>(count)
    let dims = this.dims
    data.forEach((item, i) => {
      const at = byIndex ? (item as { index: number }).index : i
      if (at < 0 || at >= count || out[at]) throw bad(`index ${at} out of range or repeated`)
      const vec = toVector((item as { embedding?: unknown } | null)?.embedding)
      if (!vec) throw bad(`embedding ${at} is not a non-empty array of finite numbers`)
      dims ||= vec.length
      if (vec.length !== dims) throw bad(`embedding ${at} has ${vec.length} dimensions, expected ${dims}`)
      let norm = 0
      for (const x of vec) norm += x * x
      if (norm === 0) throw bad(`embedding ${at} is all zeros`)
      norm = Math.sqrt(norm)
      out[at] = vec.map((x) => x / norm)
    })
    this.dims = dims
    return out as number[][]
  }

  private mapNetworkError(err: unknown): BurrowError {
    if (err instanceof BurrowError) return err
    if (
      err instanceof undiciErrors.HeadersTimeoutError ||
      err instanceof undiciErrors.BodyTimeoutError ||
      err instanceof undiciErrors.ConnectTimeoutError
    )
      return this.timedOut()
    const message = err instanceof Error ? err.message : String(err)
    return new BurrowError(
      'PROVIDER_ERROR',
      `The embeddings endpoint could not be reached: ${message}`,
      { provider: PROVIDER },
      { cause: err },
    )
  }

  private timedOut(): BurrowError {
    return new BurrowError('PROVIDER_TIMEOUT', `The embeddings endpoint did not answer within ${this.timeoutMs} ms.`, {
      provider: PROVIDER,
    })
  }
}

/** Where embeddings are POSTed, from a configured base URL (see `OpenAiEmbedderOptions.baseUrl`). */
export function embeddingsUrl(baseUrl: string): string {
  let url: URL
  try {
    url = new URL(baseUrl.trim())
  } catch {
    throw new BurrowError('PROVIDER_NOT_CONFIGURED', `The embeddings URL is not a valid URL: '${baseUrl}'.`, { provider: PROVIDER })
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new BurrowError('PROVIDER_NOT_CONFIGURED', `The embeddings URL must be http(s): '${baseUrl}'.`, { provider: PROVIDER })
  }
  const path = url.pathname.replace(/\/+$/, '')
  url.pathname = path.endsWith('/embeddings') ? path : path === '' ? '/v1/embeddings' : `${path}/embeddings`
  url.hash = ''
  return url.toString()
}

/** A float array, or base64 little-endian float32 (what `encoding_format: 'base64'` returns). */
function toVector(e: unknown): number[] | undefined {
  let v: unknown[]
  if (typeof e === 'string') {
    const buf = Buffer.from(e, 'base64')
    if (buf.length === 0 || buf.length % 4 !== 0) return undefined
    v = Array.from({ length: buf.length / 4 }, (_, i) => buf.readFloatLE(i * 4))
  } else if (Array.isArray(e)) v = e
  else return undefined
  if (v.length === 0 || !v.every((x) => typeof x === 'number' && Number.isFinite(x))) return undefined
  return v as number[]
}

function describe(text: string): string {
  try {
    const j = JSON.parse(text) as { error?: { message?: string } | string; message?: string; detail?: string }
    if (typeof j.error === 'string') return j.error
    return j.error?.message ?? j.message ?? j.detail ?? text.slice(0, 500)
  } catch {
    return text.slice(0, 500) || '(empty body)'
  }
}

function intIn(name: string, v: number, min: number, max: number): number {
  if (!Number.isInteger(v) || v < min || v > max) throw new RangeError(`${name} must be an integer from ${min} to ${max} (got ${v})`)
  return v
}
