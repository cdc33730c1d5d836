// Starts the real Burrow server on loopback (and, on request, the fake LLM server),
// with logs captured as parsed JSON lines and every response checked against the OpenAPI file.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { request, Agent } from 'undici'
import { createBurrow, type Burrow } from '../../src/app/burrow.js'
import { loadConfig } from '../../src/app/config.js'
import { checkResponse } from './openapi-check.js'
import { openSse, type SseStream } from './sse-client.js'
import { startFakeLlm, type FakeLlmServer } from './fake-llm-server.js'

export interface ApiResponse {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: any
}

export interface CallOptions {
  body?: unknown
  rawBody?: string
  headers?: Record<string, string>
  token?: string | null
  contentType?: string
}

const agent = new Agent({ connections: 256 })

export class Api {
  constructor(
    readonly url: string,
    readonly token?: string,
  ) {}

  async call(method: string, path: string, opts: CallOptions = {}): Promise<ApiResponse> {
    const headers: Record<string, string> = { ...opts.headers }
    const token = opts.token === undefined ? this.token : (opts.token ?? undefined)
    if (token) headers.authorization = `Bearer ${token}`
    let body: string | undefined
    if (opts.rawBody !== undefined) body = opts.rawBody
    else if (opts.body !== undefined) body = JSON.stringify(opts.body)
    if (body !== undefined) headers['content-type'] ??= opts.contentType ?? 'application/json'
    const res = await request(`${this.url}${path}`, { method: method as 'GET', headers, body, dispatcher: agent })
    const text = await res.body.text()
    const type = String(res.headers['content-type'] ?? '')
    let parsed: any = text
    if (type.includes('json') && text.length > 0) parsed = JSON.parse(text)
    if (text.length === 0) parsed = undefined
    const bad = checkResponse(method, path, res.statusCode, type, parsed)
    if (bad) throw new Error(`response does not match openapi/openapi.json: ${bad}\n${text.slice(0, 500)}`)
    return { status: res.statusCode, headers: res.headers, body: parsed }
  }

  get(path: string, opts?: CallOptions) {
    return this.call('GET', path, opts)
  }
  post(path: string, body?: unknown, opts: CallOptions = {}) {
    return this.call('POST', path, { ...opts, body })
  }
  delete(path: string, opts?: CallOptions) {
    return this.call('DELETE', path, opts)
  }
  patch(path: string, body?: unknown, opts: CallOptions = {}) {
    return this.call('PATCH', path, { ...opts, body })
  }

  /** Creates a session and returns its id (asserting 201). */
  async createSession(body: Record<string, unknown> = {}, opts: CallOptions = {}): Promise<string> {
    const r = await this.post('/v1/sessions', { model: 'offline:echo', ...body }, opts)
    if (r.status !== 201) throw new Error(`create failed: ${r.status} ${JSON.stringify(r.body)}`)
    return r.body.session_id
  }

  turn(id: string, body: unknown, opts: CallOptions = {}) {
    return this.post(`/v1/sessions/${id}/turns`, body, opts)
  }

  sse(
    path: string,
    opts: { method?: 'GET' | 'POST'; headers?: Record<string, string>; body?: unknown; token?: string | null } = {},
  ): Promise<SseStream> {
    const headers: Record<string, string> = { ...opts.headers }
    const token = opts.token === undefined ? this.token : (opts.token ?? undefined)
    if (token) headers.authorization = `Bearer ${token}`
    return openSse(`${this.url}${path}`, { method: opts.method, headers, body: opts.body })
  }
}

export interface Harness {
  url: string
  burrow: Burrow
  api: Api
  /** Every log line the server wrote, parsed. */
  logs: any[]
  /** The fake LLM server, when `fake: true`. */
  fake: FakeLlmServer
  dataDir: string
  close(): Promise<void>
}

/** Env for the capability-free (ephemeral) build; tests add what they need. */
export const EPHEMERAL_ENV = { BURROW_SESSION_STORE: 'off', BURROW_MEMORY_STORE: 'off', BURROW_COMPACTION: 'off' } as const

/** The capability builds the REST suites run in (docs/api.md, Capabilities; A and B so far). */
export const MODES = [
  { name: 'ephemeral', env: { BURROW_SESSION_STORE: 'off' } as Record<string, string>, persistent: false },
  { name: 'lmdb', env: { BURROW_SESSION_STORE: 'lmdb' } as Record<string, string>, persistent: true },
] as const

export interface StartOptions {
  token?: string
  fake?: boolean
  /** Reuse a fake LLM server (e.g. across a restart). */
  fakeServer?: FakeLlmServer
  /** Reuse a data directory (a restart); it is then left in place on close. */
  dataDir?: string
}

export async function startBurrow(env: Record<string, string> = {}, opts: StartOptions = {}): Promise<Harness> {
  const ownDir = opts.dataDir === undefined
  const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'burrow-test-')))
  const ownFake = opts.fake && !opts.fakeServer
  const fake =
    opts.fakeServer ??
    (opts.fake ? await startFakeLlm({ openaiKey: 'sk-test', anthropicKey: 'ak-test' }) : (undefined as unknown as FakeLlmServer))
  const logs: any[] = []
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const line of String(chunk).split('\n')) if (line.trim()) logs.push(JSON.parse(line))
      cb()
    },
  })
  const fakeEnv: Record<string, string> = fake
    ? {
        OPENAI_API_KEY: 'sk-test',
        OPENAI_BASE_URL: `${fake.url}/v1`,
        ANTHROPIC_API_KEY: 'ak-test',
        ANTHROPIC_BASE_URL: fake.url,
        BURROW_PROVIDER_RETRY_BASE_MS: '5',
        BURROW_PROVIDER_RETRY_MAX_MS: '20',
        BURROW_DEFAULT_MODEL: 'offline:echo',
      }
    : {}
  const config = loadConfig({
    HOST: '127.0.0.1',
    PORT: '0',
    BURROW_DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    ...EPHEMERAL_ENV,
    ...fakeEnv,
    ...env,
  })
  const burrow = await createBurrow(config, { logger: pino({ level: config.logLevel }, sink), defaultMetrics: false })
  const url = await burrow.listen()
  return {
    url,
    burrow,
    api: new Api(url, opts.token),
    logs,
    fake,
    dataDir,
    async close() {
      await burrow.close()
      if (ownFake) await fake.close()
      if (ownDir) await rm(dataDir, { recursive: true, force: true })
    },
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Polls until `fn` returns truthy (for asynchronous effects), failing after `ms`. */
export async function eventually<T>(fn: () => T | Promise<T>, ms = 3000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > end) throw new Error('condition not met in time')
    await sleep(10)
  }
}
