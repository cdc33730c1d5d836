// A scripted fake of the OpenAI Chat Completions and Anthropic Messages HTTP APIs, speaking their
// real wire formats (JSON and SSE streaming) and doing the request validation the real APIs do —
// notably tool-call / tool-result pairing. Used by the project's tests to drive real provider
// client code. Per-API details live in ./fake-llm/{openai,anthropic}.ts.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { FakeRequestError, resolveStep, type FakeApi, type FakeStep, type RecordedRequest, type Rendered } from './fake-llm/common.js'
import {
  handleEmbeddings,
  openaiAuthError,
  openaiEcho,
  openaiErrorBody,
  OPENAI_BAD_BODY,
  renderOpenAi,
  validateOpenAi,
} from './fake-llm/openai.js'
import { anthropicEcho, anthropicErrorBody, anthropicHeaderError, renderAnthropic, validateAnthropic } from './fake-llm/anthropic.js'

export type { FakeApi, FakeStep, FakeToolCall, RecordedRequest } from './fake-llm/common.js'
export { embeddingFor } from './fake-llm/openai.js'

export interface FakeLlmServer {
  /** 'http://127.0.0.1:<port>' */
  url: string
  /** every request received, in order (including rejected ones) */
  requests: RecordedRequest[]
  /** FIFO script; the first step whose `api` matches (or has none) is consumed by the next request */
  enqueue(...steps: FakeStep[]): void
  /** steps not yet consumed */
  pending(): number
  /** stops the server; also destroys hanging sockets */
  close(): Promise<void>
  /**
   * When true, a compaction request (its messages carry the compaction prompt) is answered
   * with a short summary without consuming a scripted step, so scripts can ignore when
   * compaction happens.
   */
  autoSummaries: boolean
}

const ROUTES: Record<string, FakeApi | 'embeddings'> = {
  '/v1/chat/completions': 'openai',
  '/v1/messages': 'anthropic',
  '/v1/embeddings': 'embeddings',
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

export async function startFakeLlm(opts: { openaiKey?: string; anthropicKey?: string } = {}): Promise<FakeLlmServer> {
  const requests: RecordedRequest[] = []
  const script: FakeStep[] = []
  const sockets = new Set<Socket>()
  let seq = 0
  const nextId = () => (++seq).toString(36).padStart(6, '0')

  const takeStep = (api: FakeApi): FakeStep | undefined => {
    const i = script.findIndex((s) => s.api === undefined || s.api === api)
    return i < 0 ? undefined : script.splice(i, 1)[0]
  }

  const errorBody = (api: FakeApi, status: number, message: string, param: string | null = null) =>
    api === 'anthropic' ? anthropicErrorBody(status, message) : openaiErrorBody(status, message, param)

  function sendJson(res: ServerResponse, rec: RecordedRequest, status: number, body: unknown, headers: Record<string, string> = {}): void {
    const text = JSON.stringify(body)
    rec.status = status
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      ...headers,
    })
    res.end(text)
  }

  function reject(res: ServerResponse, rec: RecordedRequest, status: number, message: string, param: string | null = null) {
    rec.rejected = message
    sendJson(res, rec, status, errorBody(rec.api, status, message, param))
  }

  /** Write `data`, then kill the connection once it is flushed (mid-response). */
  function cutOff(res: ServerResponse, data: string): void {
    res.write(data, () => res.socket?.destroy())
  }

  async function answer(res: ServerResponse, rec: RecordedRequest, step: FakeStep, r: Rendered, stream: boolean) {
    const headers = {
      ...(rec.api === 'anthropic' ? { 'request-id': `req_fake${nextId()}` } : { 'x-request-id': `req_${nextId()}` }),
      ...step.headers,
    }
    if (!stream) {
      if (step.delayMs) await sleep(step.delayMs)
      const text = JSON.stringify(r.json)
      if (step.malformed === 'bad_json') return sendRaw(res, rec, text.slice(0, Math.floor(text.length / 2)), headers)
      if (step.hang === 'body' || step.malformed === 'truncated') {
        rec.status = 200
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers })
        const half = text.slice(0, Math.floor(text.length / 2))
        if (step.hang === 'body') res.write(half)
        else cutOff(res, half)
        return
      }
      return sendJson(res, rec, 200, r.json, headers)
    }

    rec.status = 200
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      ...headers,
    })
    const frames = [...r.frames]
    if (step.malformed === 'bad_json') frames.splice(1, 0, r.badFrame)
    if (step.malformed !== 'no_terminator') frames.push(...r.terminator)
    if (step.hang === 'body') {
      res.write(frames[0])
      return // stall forever; close() destroys the socket
    }
    const cut = step.malformed === 'truncated' ? Math.max(1, Math.floor(frames.length / 2)) : frames.length
    for (let i = 0; i < cut; i++) {
      if (i > 0 && step.delayMs) await sleep(step.delayMs)
      if (res.destroyed) return
      res.write(frames[i])
    }
    if (step.malformed === 'truncated') {
      const next = frames[cut] ?? ''
      if (step.delayMs) await sleep(step.delayMs)
      cutOff(res, next.slice(0, Math.floor(next.length / 2)))
    } else {
      res.end()
    }
  }

  function sendRaw(res: ServerResponse, rec: RecordedRequest, text: string, headers: Record<string, string>) {
    rec.status = 200
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers })
    res.end(text)
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    const raw = Buffer.concat(chunks).toString('utf8')
    const path = new URL(req.url ?? '/', 'http://x').pathname
    const route = req.method === 'POST' ? ROUTES[path] : undefined
    let body: any = raw
    try {
      body = JSON.parse(raw)
    } catch {
      // keep the raw string
    }
    const api: FakeApi = route === 'anthropic' || (!route && path.includes('messages')) ? 'anthropic' : 'openai'
    const rec: RecordedRequest = { api, path, headers: req.headers, body }
    requests.push(rec)
    if (!route) return reject(res, rec, 404, `Unknown request URL: ${req.method} ${path}.`)

    // auth & headers
    if (api === 'openai' && opts.openaiKey !== undefined) {
      const err = openaiAuthError(req.headers, opts.openaiKey)
      if (err) return reject(res, rec, 401, err)
    }
    if (api === 'anthropic') {
      const err = anthropicHeaderError(req.headers, opts.anthropicKey)
      if (err) return reject(res, rec, err[0], err[1])
    }
    if (body === raw) {
      return reject(res, rec, 400, api === 'anthropic' ? 'There was an error parsing the body: invalid JSON' : OPENAI_BAD_BODY)
    }

    try {
      if (route === 'embeddings') return sendJson(res, rec, 200, handleEmbeddings(body))
      if (route === 'openai') validateOpenAi(body)
      else validateAnthropic(body)
    } catch (e) {
      if (e instanceof FakeRequestError) return reject(res, rec, 400, e.message, e.param)
      throw e
    }

    const summaryRequest = api$.autoSummaries && raw.includes('You are performing a CONTEXT COMPACTION')
    const scripted = summaryRequest
      ? { text: `auto summary of ${Array.isArray(body.messages) ? body.messages.length : 0} messages` }
      : takeStep(api)
    if (scripted && !summaryRequest) rec.step = scripted
    const echo = api === 'anthropic' ? anthropicEcho(body) : openaiEcho(body)
    const step: FakeStep = scripted ?? { text: `echo: ${echo}` }

    if (step.hang === 'headers') return // never answer; close() destroys the socket
    if (step.status !== undefined && step.status >= 400) {
      if (step.delayMs) await sleep(step.delayMs)
      const message = step.errorMessage ?? defaultErrorMessage(step.status)
      return sendJson(res, rec, step.status, errorBody(api, step.status, message), step.headers)
    }

    const resolved = resolveStep(step, {
      rawBodyLength: raw.length,
      newToolId: () => (api === 'anthropic' ? `toolu_fake${nextId()}` : `call_fake${nextId()}`),
      stopDefaults: api === 'anthropic' ? { text: 'end_turn', tools: 'tool_use' } : { text: 'stop', tools: 'tool_calls' },
    })
    const rendered =
      api === 'anthropic'
        ? renderAnthropic(resolved, { id: `msg_fake${nextId()}`, model: body.model })
        : renderOpenAi(resolved, {
            id: `chatcmpl-fake${nextId()}`,
            model: body.model,
            created: Math.floor(Date.now() / 1000),
            includeUsage: body.stream_options?.include_usage === true,
          })
    await answer(res, rec, step, rendered, body.stream === true)
  }

  const api$: FakeLlmServer = {
    url: '',
    requests,
    enqueue: (...steps) => void script.push(...steps),
    pending: () => script.length,
    autoSummaries: false,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        for (const s of sockets) s.destroy()
        server.closeAllConnections()
      }),
  }
  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'text/plain' })
        res.end(`fake-llm-server bug: ${String(err)}`)
      } else {
        res.destroy()
      }
    })
  })
  server.on('connection', (s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  const { port } = server.address() as AddressInfo

  api$.url = `http://127.0.0.1:${port}`
  return api$
}

function defaultErrorMessage(status: number): string {
  if (status === 429) return 'Rate limit exceeded'
  if (status === 529) return 'Overloaded'
  if (status >= 500) return 'Internal server error'
  if (status === 401) return 'Invalid authentication'
  return 'Bad request'
}
