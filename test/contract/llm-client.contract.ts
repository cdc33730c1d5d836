// The conformance suite every network LlmClient must pass, run against the fake LLM server
// speaking that provider's real wire format: streaming, tool calls, usage, HTTP errors and
// their codes, retry with Retry-After, timeouts, malformed streams, max_tokens cut-offs, and
// interruption. Wire translation (request bodies, history shapes) is each provider's own test.
import type { Test } from 'tap'
import type { LlmClient, LlmRequest } from '../../src/core/llm.js'
import type { Message, ToolDefinition } from '../../src/core/messages.js'
import { ProviderHttp, type ProviderHttpOptions } from '../../src/providers/provider-http.js'
import { caught, isCode } from '../helpers/errors.js'
import { startFakeLlm, type FakeLlmServer, type FakeStep } from '../helpers/fake-llm-server.js'
import { closedPort, sseServer } from '../helpers/servers.js'

/** One provider under test: how to build its client, and what of its wire the suite must know. */
export interface LlmClientSubject {
  /** The client's `provider`, also its errors' `data.provider`. */
  provider: string
  /** The model named in requests. */
  model: string
  /** Where the client posts on the fake server. */
  path: string
  /** The fake server's options that make it require `key` from this provider's client. */
  fakeOptions(key: string): { openaiKey?: string; anthropicKey?: string }
  /** A client talking to `origin` (`http://host:port`, no path) with `apiKey`, over `http`. */
  client(http: ProviderHttp, origin: string, apiKey: string): LlmClient
  /** The wire's stop reason for "cut off by max_tokens". */
  maxTokensStop: string
  /** SSE frames of a stream that starts, streams the text 'par', then reports an error carrying `message`. */
  errorMidStream(message: string): string[]
}

/** Short timeouts and backoff, so failure paths run in milliseconds. */
export const CONTRACT_HTTP: ProviderHttpOptions = {
  headersTimeoutMs: 500,
  idleTimeoutMs: 300,
  connectTimeoutMs: 1000,
  maxRetries: 2,
  retryBaseMs: 5,
  retryMaxMs: 50,
}
export const KEY = 'sk-contract-test'

export const user = (text: string): Message => ({ role: 'user', content: [{ type: 'text', text }] })
export const TOOLS: ToolDefinition[] = [
  { name: 'get_weather', description: 'Weather for a city', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
  { name: 'get_time', input_schema: { type: 'object', properties: { tz: { type: 'string' } } } },
]

export interface SubjectCtx {
  fake: FakeLlmServer
  http: ProviderHttp
  client: LlmClient
  req(extra?: Partial<LlmRequest>): LlmRequest
}

/** A fresh fake server (requiring `KEY`) and a client of `subject` on it, closed on teardown. */
export async function startSubject(
  t: Test,
  subject: LlmClientSubject,
  o: { apiKey?: string; origin?: string; http?: Partial<ProviderHttpOptions> } = {},
): Promise<SubjectCtx> {
  const fake = await startFakeLlm(subject.fakeOptions(KEY))
  const http = new ProviderHttp({ ...CONTRACT_HTTP, ...o.http })
  t.teardown(async () => {
    await fake.close()
    await http.close()
  })
  const client = subject.client(http, o.origin ?? fake.url, o.apiKey ?? KEY)
  const req = (extra: Partial<LlmRequest> = {}): LlmRequest => ({ model: subject.model, maxTokens: 256, messages: [user('hi')], ...extra })
  return { fake, http, client, req }
}

function chunksOf(s: string, n: number): string[] {
  const out: string[] = []
  for (let i = 0; i < s.length; i += n) out.push(s.slice(i, i + n))
  return out
}

export function llmClientContract(t: Test, subject: LlmClientSubject): void {
  const setup = (t: Test, o?: Parameters<typeof startSubject>[2]) => startSubject(t, subject, o)

  // ---- streaming ------------------------------------------------------------------------------

  t.test('streamed text: deltas in order, final text block, usage from the wire', async (t) => {
    const { fake, client, req } = await setup(t)
    const text = 'The quick brown fox jumps over the lazy dog.'
    fake.enqueue({ text, chunkSize: 5, usage: { input_tokens: 42, output_tokens: 9 } })
    const deltas: string[] = []
    const res = await client.complete(req(), (d) => {
      t.equal(d.type, 'text')
      deltas.push(d.text)
    })
    t.equal(client.provider, subject.provider)
    t.equal(client.offline, false)
    t.same(deltas, chunksOf(text, 5), 'every wire chunk, in order')
    t.same(res.content, [{ type: 'text', text }])
    t.equal(res.stopReason, 'end_turn')
    t.same(res.usage, { input_tokens: 42, output_tokens: 9 })
    t.equal(fake.requests.length, 1)
    t.match(fake.requests[0], { path: subject.path, status: 200, body: { stream: true, model: subject.model } })
  })

  t.test('parallel tool calls with fragmented arguments', async (t) => {
    const { fake, client, req } = await setup(t)
    const weather = { city: 'Paris', units: 'metric', days: [1, 2, 3], nested: { a: 'b "quoted" \\ slash' } }
    const time = { tz: 'Europe/Paris' }
    fake.enqueue({
      text: 'Checking both.',
      chunkSize: 3,
      toolCalls: [
        { id: 'call_w', name: 'get_weather', input: weather },
        { id: 'call_t', name: 'get_time', input: time },
      ],
      usage: { input_tokens: 30, output_tokens: 20 },
    })
    const deltas: string[] = []
    const res = await client.complete(req({ tools: TOOLS }), (d) => deltas.push(d.text))
    t.same(res.content, [
      { type: 'text', text: 'Checking both.' },
      { type: 'tool_use', id: 'call_w', name: 'get_weather', input: weather },
      { type: 'tool_use', id: 'call_t', name: 'get_time', input: time },
    ])
    t.equal(res.stopReason, 'tool_use')
    t.equal(deltas.join(''), 'Checking both.', 'only text is streamed as deltas')
    t.same(res.usage, { input_tokens: 30, output_tokens: 20 })
    t.equal(fake.requests[0]!.rejected, undefined, 'the tools were sent in a shape the server accepts')
  })

  t.test('tool calls without text, arguments split into single characters', async (t) => {
    const { fake, client, req } = await setup(t)
    fake.enqueue({
      chunkSize: 1,
      toolCalls: [
        { id: 'call_1', name: 'get_time', input: { tz: 'UTC' } },
        { id: 'call_2', name: 'get_time', input: {} },
      ],
    })
    const res = await client.complete(req({ tools: TOOLS }))
    t.same(res.content, [
      { type: 'tool_use', id: 'call_1', name: 'get_time', input: { tz: 'UTC' } },
      { type: 'tool_use', id: 'call_2', name: 'get_time', input: {} },
    ])
    t.equal(res.stopReason, 'tool_use')
  })

  // ---- requests the provider refuses ----------------------------------------------------------------

  t.test('a history with an unanswered tool call is refused: 400, marked rejected, not retried', async (t) => {
    const { fake, client, req } = await setup(t)
    const messages: Message[] = [
      user('go'),
      { role: 'assistant', content: [{ type: 'tool_use', id: 'call_a', name: 'get_time', input: {} }] },
      user('never mind'),
    ]
    const err = await caught(client.complete(req({ messages })))
    if (isCode(t, err, 'PROVIDER_ERROR')) t.same(err.data, { provider: subject.provider, status: 400, rejected: true })
    t.equal(fake.requests.length, 1)
    t.ok(fake.requests[0]!.rejected, 'the server refused it')
  })

  t.test("400 is not retried and carries the server's message", async (t) => {
    const { fake, client, req } = await setup(t)
    fake.enqueue({ status: 400, errorMessage: 'bad parameter' }, { text: 'must not be reached' })
    const err = await caught(client.complete(req()))
    if (isCode(t, err, 'PROVIDER_ERROR')) {
      t.match(err.message, /bad parameter/)
      t.same(err.data, { provider: subject.provider, status: 400, rejected: true })
    }
    t.equal(fake.requests.length, 1)
  })

  t.test('401 for a wrong api key, not retried', async (t) => {
    const { fake, client, req } = await setup(t, { apiKey: 'sk-wrong' })
    const err = await caught(client.complete(req()))
    if (isCode(t, err, 'PROVIDER_ERROR')) t.same(err.data, { provider: subject.provider, status: 401 })
    t.equal(fake.requests.length, 1)
    t.equal(fake.requests[0]!.status, 401)
  })

  // ---- retry ----------------------------------------------------------------------------------------

  for (const status of [429, 500, 503, 529]) {
    t.test(`${status} is retried, then success`, async (t) => {
      const { fake, client, req } = await setup(t)
      fake.enqueue({ status }, { text: 'ok' })
      const res = await client.complete(req())
      t.same(res.content, [{ type: 'text', text: 'ok' }])
      t.same(
        fake.requests.map((r) => r.status),
        [status, 200],
      )
    })
  }

  t.test('Retry-After is waited for before the retry', async (t) => {
    const { fake, client, req } = await setup(t, { http: { retryMaxMs: 2000 } })
    fake.enqueue({ status: 429, headers: { 'retry-after': '0.3' } }, { text: 'after the wait' })
    const started = performance.now()
    const res = await client.complete(req())
    t.same(res.content, [{ type: 'text', text: 'after the wait' }])
    t.ok(performance.now() - started >= 295, `took ${Math.round(performance.now() - started)} ms, Retry-After said 300`)
    t.same(
      fake.requests.map((r) => r.status),
      [429, 200],
    )
  })

  t.test('a failure on every attempt → PROVIDER_ERROR after maxRetries, with the last message', async (t) => {
    const { fake, client, req } = await setup(t)
    const step: FakeStep = { status: 500, errorMessage: 'upstream exploded' }
    fake.enqueue(step, step, step, { text: 'must not be reached' })
    const err = await caught(client.complete(req()))
    if (isCode(t, err, 'PROVIDER_ERROR')) {
      t.match(err.message, /HTTP 500: upstream exploded/)
      t.same(err.data, { provider: subject.provider, status: 500 })
    }
    t.equal(fake.requests.length, 3, '1 attempt + 2 retries')
    t.equal(fake.pending(), 1)
  })

  t.test('connection refused → PROVIDER_ERROR after retries', async (t) => {
    const { http, client, req } = await setup(t, { origin: `http://127.0.0.1:${await closedPort()}` })
    let attempts = 0
    http.dispatcher.on('connectionError', () => attempts++)
    const err = await caught(client.complete(req()))
    if (isCode(t, err, 'PROVIDER_ERROR')) t.same(err.data, { provider: subject.provider })
    t.equal(attempts, 3, '1 attempt + 2 retries')
  })

  // ---- timeouts and malformed streams -----------------------------------------------------------------

  t.test('no response headers → PROVIDER_TIMEOUT, not retried', async (t) => {
    const { fake, client, req } = await setup(t)
    fake.enqueue({ hang: 'headers' }, { text: 'must not be reached' })
    const err = await caught(client.complete(req()))
    if (isCode(t, err, 'PROVIDER_TIMEOUT')) t.same(err.data, { provider: subject.provider })
    t.equal(fake.requests.length, 1)
  })

  t.test('a stream that stalls mid-body → PROVIDER_TIMEOUT, never replayed', async (t) => {
    const { fake, client, req } = await setup(t)
    fake.enqueue({ text: 'this will never finish', hang: 'body' })
    isCode(t, await caught(client.complete(req())), 'PROVIDER_TIMEOUT')
    t.equal(fake.requests.length, 1)
  })

  for (const malformed of ['bad_json', 'truncated', 'no_terminator'] as const) {
    t.test(`malformed stream (${malformed}) → PROVIDER_ERROR, never a partial success`, async (t) => {
      const { fake, client, req } = await setup(t)
      fake.enqueue({ text: 'a reasonably long answer that arrives in many chunks', chunkSize: 4, malformed })
      isCode(t, await caught(client.complete(req())), 'PROVIDER_ERROR')
      t.equal(fake.requests.length, 1)
    })
  }

  t.test('tool arguments that are not JSON (not cut off) → PROVIDER_ERROR', async (t) => {
    const { fake, client, req } = await setup(t)
    fake.enqueue({ toolCalls: [{ id: 'call_x', name: 'get_time', input: {}, rawArguments: '{"tz": UTC}' }] })
    isCode(t, await caught(client.complete(req({ tools: TOOLS }))), 'PROVIDER_ERROR')
  })

  t.test('an error reported mid-stream → PROVIDER_ERROR carrying its message', async (t) => {
    const url = await sseServer(t, subject.errorMidStream('The server had an error while processing your request.'))
    const { client, req } = await setup(t, { origin: url })
    const deltas: string[] = []
    const err = await caught(client.complete(req(), (d) => deltas.push(d.text)))
    if (isCode(t, err, 'PROVIDER_ERROR')) t.match(err.message, /The server had an error while processing your request/)
    t.same(deltas, ['par'], 'what streamed before the error was delivered')
  })

  // ---- max_tokens cut-off -------------------------------------------------------------------------

  t.test('cut off by max_tokens mid tool arguments: the incomplete call is dropped', async (t) => {
    const { fake, client, req } = await setup(t)
    fake.enqueue({
      toolCalls: [{ id: 'call_cut', name: 'get_weather', input: {}, rawArguments: '{"city":"Par' }],
      stopReason: subject.maxTokensStop,
    })
    const res = await client.complete(req({ tools: TOOLS }))
    t.same(res.content, [])
    t.equal(res.stopReason, 'max_tokens')

    fake.enqueue({
      text: 'Let me look that up.',
      toolCalls: [{ id: 'call_cut2', name: 'get_weather', input: {}, rawArguments: '{"city":' }],
      stopReason: subject.maxTokensStop,
    })
    const res2 = await client.complete(req({ tools: TOOLS }))
    t.same(res2.content, [{ type: 'text', text: 'Let me look that up.' }])
    t.equal(res2.stopReason, 'max_tokens')
  })

  t.test('plain text cut off by max_tokens', async (t) => {
    const { fake, client, req } = await setup(t)
    fake.enqueue({ text: 'an unfinished sen', stopReason: subject.maxTokensStop })
    const res = await client.complete(req())
    t.same(res.content, [{ type: 'text', text: 'an unfinished sen' }])
    t.equal(res.stopReason, 'max_tokens')
  })

  // ---- interruption ----------------------------------------------------------------------------------

  t.test('abort mid-stream → rejects with exactly the reason, quickly', async (t) => {
    const { fake, client, req } = await setup(t)
    fake.enqueue({ text: 'x'.repeat(40), chunkSize: 2, delayMs: 60 }) // ~1.2 s if left alone
    const ac = new AbortController()
    const reason = new Error('interrupted by the test')
    let abortedAt = 0
    const deltas: string[] = []
    const err = await caught(
      client.complete(req({ signal: ac.signal }), (d) => {
        deltas.push(d.text)
        if (abortedAt === 0) {
          abortedAt = performance.now()
          ac.abort(reason)
        }
      }),
    )
    t.equal(err, reason)
    t.ok(performance.now() - abortedAt < 200, 'rejects promptly')
    t.ok(deltas.length < 5, 'the stream stopped')
  })

  for (const hang of ['headers', 'body'] as const) {
    t.test(`abort while the server hangs (${hang}) → rejects with exactly the reason`, async (t) => {
      const { fake, client, req } = await setup(t)
      fake.enqueue({ text: 'stalled', hang })
      const ac = new AbortController()
      const reason = { why: 'user pressed stop' }
      const started = performance.now()
      setTimeout(() => ac.abort(reason), 50)
      t.equal(await caught(client.complete(req({ signal: ac.signal }))), reason)
      t.ok(performance.now() - started < 250, 'well before the provider timeouts')
      t.equal(fake.requests.length, 1)
    })
  }

  t.test('abort during the Retry-After wait → rejects with exactly the reason, sends nothing more', async (t) => {
    const { fake, client, req } = await setup(t, { http: { retryMaxMs: 10_000 } })
    fake.enqueue({ status: 503, headers: { 'retry-after': '10' } }, { text: 'must not be reached' })
    const ac = new AbortController()
    const reason = new Error('interrupted during the wait')
    const p = caught(client.complete(req({ signal: ac.signal })))
    while (fake.requests[0]?.status === undefined) await new Promise((resolve) => setTimeout(resolve, 5))
    const abortedAt = performance.now()
    setTimeout(() => ac.abort(reason), 30)
    t.equal(await p, reason)
    t.ok(performance.now() - abortedAt < 300, 'did not sit out the 10 s')
    t.equal(fake.requests.length, 1)
    t.equal(fake.pending(), 1)
  })

  t.test('an already-aborted signal rejects with its reason and sends nothing', async (t) => {
    const { fake, client, req } = await setup(t)
    const reason = new Error('already gone')
    t.equal(await caught(client.complete(req({ signal: AbortSignal.abort(reason) }))), reason)
    t.equal(fake.requests.length, 0)
  })
}
