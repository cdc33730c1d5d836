import { Agent, errors as undiciErrors, request, type Dispatcher } from 'undici'
import { BurrowError } from '../core/errors.js'
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
  /** Retries after the first attempt, for 429/5xx and connection errors before a response (default 2). */
  maxRetries?: number
  /** Backoff: full jitter up to `retryBaseMs · 2^attempt`, capped at `retryMaxMs` (defaults 500 ms, 8 s). */
  retryBaseMs?: number
  retryMaxMs?: number
  /** A dispatcher to share (e.g. a keep-alive pool); without one the embedder owns one, closed by `close()`. */
  dispatcher?: Dispatcher
}

const RETRYABLE_STATUS = new Set([408, 429, 500, 502, 503, 504, 529])
const RETRYABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN', 'UND_ERR_SOCKET'])
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
  private readonly maxRetries: number
  private readonly retryBaseMs: number
  private readonly retryMaxMs: number
  private readonly dispatcher: Dispatcher
  private readonly ownsDispatcher: boolean

  constructor(private readonly opts: OpenAiEmbedderOptions) {
    if (!opts.model?.trim()) throw new BurrowError('PROVIDER_NOT_CONFIGURED', 'No embeddings model is configured (BURROW_EMBEDDINGS_MODEL).', { provider: PROVIDER })
    this.url = embeddingsUrl(opts.baseUrl)
    this.id = `openai:${opts.model}@${new URL(this.url).host}`
    this.batchSize = intIn('batchSize', opts.batchSize ?? 256, 1, 2048)
    this.timeoutMs = intIn('timeoutMs', opts.timeoutMs ?? 60_000, 1, 3_600_000)
    this.maxRetries = intIn('maxRetries', opts.maxRetries ?? 2, 0, 10)
    this.retryBaseMs = intIn('retryBaseMs', opts.retryBaseMs ?? 500, 0, 60_000)
    this.retryMaxMs = intIn('retryMaxMs', opts.retryMaxMs ?? 8_000, 0, 300_000)
    this.ownsDispatcher = opts.dispatcher === undefined
    this.dispatcher = opts.dispatcher ?? new Agent({
      connect: { timeout: Math.min(this.timeoutMs, 10_000) },
      headersTimeout: this.timeoutMs, bodyTimeout: this.timeoutMs, keepAliveTimeout: 10_000,
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
      out.push(...await this.request(batch, signal))
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
    for (let attempt = 0; ; attempt++) {
      signal?.throwIfAborted()
      const timeout = AbortSignal.timeout(this.timeoutMs)
      const both = signal ? AbortSignal.any([signal, timeout]) : timeout
      let status: number
      let text: string
      let retryAfter: string | string[] | undefined
      try {
        const res = await request(this.url, { method: 'POST', dispatcher: this.dispatcher, signal: both, headers, body: payload })
        status = res.statusCode
        retryAfter = res.headers['retry-after']
        text = await res.body.text()
      } catch (err) {
        if (signal?.aborted) throw signal.reason
        const mapped = this.mapNetworkError(err, timeout.aborted)
        if (mapped.retryable && attempt < this.maxRetries) { await this.backoff(attempt, undefined, signal); continue }
        throw mapped.error
      }
      if (status >= 200 && status < 300) return this.parse(text, input.length)
      if (RETRYABLE_STATUS.has(status) && attempt < this.maxRetries) {
        await this.backoff(attempt, retryAfterMs(retryAfter), signal)
        continue
      }
      throw new BurrowError('PROVIDER_ERROR', `The embeddings endpoint answered HTTP ${status}: ${describe(text)}`,
        { provider: PROVIDER, status })
    }
  }

  /** Checks an OpenAI embeddings response and returns its vectors in input order, normalised. */
  private parse(text: string, count: number): number[][] {
    const bad = (why: string) => new BurrowError('PROVIDER_ERROR', `The embeddings endpoint sent a malformed response: ${why}.`, { provider: PROVIDER })
    let body: unknown
    try { body = JSON.parse(text) } catch { throw bad('not JSON') }
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

  private mapNetworkError(err: unknown, timedOut: boolean): { error: BurrowError; retryable: boolean } {
    if (timedOut || err instanceof undiciErrors.HeadersTimeoutError || err instanceof undiciErrors.BodyTimeoutError ||
        err instanceof undiciErrors.ConnectTimeoutError) {
      return { error: new BurrowError('PROVIDER_TIMEOUT', `The embeddings endpoint did not answer within ${this.timeoutMs} ms.`, { provider: PROVIDER }), retryable: false }
    }
    const code = (err as { code?: string } | null)?.code ?? ''
    const cause = (err as { cause?: { code?: string } } | null)?.cause?.code ?? ''
    const message = err instanceof Error ? err.message : String(err)
    return {
      error: new BurrowError('PROVIDER_ERROR', `The embeddings endpoint could not be reached: ${message}`, { provider: PROVIDER }, { cause: err }),
      retryable: RETRYABLE_CODES.has(code) || RETRYABLE_CODES.has(cause),
    }
  }

  private backoff(attempt: number, retryAfter: number | undefined, signal?: AbortSignal): Promise<void> {
    const exp = Math.min(this.retryMaxMs, this.retryBaseMs * 2 ** attempt)
    const jittered = Math.random() * exp // full jitter
    const ms = retryAfter !== undefined ? Math.min(this.retryMaxMs, retryAfter) + jittered / 4 : jittered
    return sleep(ms, signal)
  }
}

/** Where embeddings are POSTed, from a configured base URL (see `OpenAiEmbedderOptions.baseUrl`). */
export function embeddingsUrl(baseUrl: string): string {
  let url: URL
  try { url = new URL(baseUrl.trim()) } catch {
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

function retryAfterMs(h: string | string[] | undefined): number | undefined {
  const v = Array.isArray(h) ? h[0] : h
  if (!v) return undefined
  const secs = Number(v)
  if (Number.isFinite(secs)) return Math.max(0, secs * 1000)
  const at = Date.parse(v)
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now())
}

function intIn(name: string, v: number, min: number, max: number): number {
  if (!Number.isInteger(v) || v < min || v > max) throw new RangeError(`${name} must be an integer from ${min} to ${max} (got ${v})`)
  return v
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) { reject(signal.reason); return }
    const onAbort = () => { clearTimeout(timer); reject(signal!.reason) }
    const timer = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve() }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
