// AnthropicProvider against the fake Anthropic Messages server: streaming, tool use,
// history translation (validated by the fake like the real API), errors, timeouts, aborts.
import t, { type Test } from 'tap'
import type { LlmRequest } from '../../src/core/llm.js'
import type { Message, ToolDefinition } from '../../src/core/messages.js'
import { AnthropicProvider } from '../../src/providers/anthropic-provider.js'
import { ProviderHttp, type ProviderHttpOptions } from '../../src/providers/provider-http.js'
import { caught, isCode } from '../helpers/errors.js'
import { startFakeLlm, type FakeLlmServer, type FakeStep } from '../helpers/fake-llm-server.js'
import { closedPort, sseServer } from '../helpers/servers.js'

const HTTP: ProviderHttpOptions = {
  headersTimeoutMs: 500, idleTimeoutMs: 300, connectTimeoutMs: 1000, maxRetries: 2, retryBaseMs: 5, retryMaxMs: 50,
}
const KEY = 'sk-ant-test'

interface Ctx { fake: FakeLlmServer; http: ProviderHttp; client: AnthropicProvider }

/** A fresh fake server (requiring `KEY`) and client per test, closed on teardown. */
async function setup(t: Test, o: { clientKey?: string; baseUrl?: string; version?: string } = {}): Promise<Ctx> {
  const fake = await startFakeLlm({ anthropicKey: KEY })
  const http = new ProviderHttp(HTTP)
  t.teardown(async () => {
    await fake.close()
    await http.close()
  })
  const client = new AnthropicProvider(http, {
    baseUrl: o.baseUrl ?? fake.url, apiKey: o.clientKey ?? KEY, defaultModel: 'anthropic:claude-sonnet-4-5',
    ...(o.version ? { version: o.version } : {}),
  })
  return { fake, http, client }
}

const user = (text: string): Message => ({ role: 'user', content: [{ type: 'text', text }] })
const req = (extra: Partial<LlmRequest> = {}): LlmRequest => ({
  model: 'claude-sonnet-4-5', maxTokens: 256, messages: [user('hi')], ...extra,
})
const TOOLS: ToolDefinition[] = [
  { name: 'get_weather', description: 'Weather for a city', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
  { name: 'get_time', input_schema: { type: 'object', properties: { tz: { type: 'string' } } } },
]

function chunksOf(s: string, n: number): string[] {
  const out: string[] = []
  for (let i = 0; i < s.length; i += n) out.push(s.slice(i, i + n))
  return out
}

// ---- streaming ------------------------------------------------------------------

t.test('streamed text: deltas in order, final text block, usage from the wire', async (t) => {
  const { fake, client } = await setup(t)
  const text = 'The quick brown fox jumps over the lazy dog.'
  fake.enqueue({ text, chunkSize: 5, usage: { input_tokens: 42, output_tokens: 9 } })
  const deltas: string[] = []
  const res = await client.complete(req(), (d) => {
    t.equal(d.type, 'text')
    deltas.push(d.text)
  })
  t.same(deltas, chunksOf(text, 5), 'every wire chunk, in order')
  t.equal(deltas.join(''), text)
  t.same(res.content, [{ type: 'text', text }])
  t.equal(res.stopReason, 'end_turn')
  t.same(res.usage, { input_tokens: 42, output_tokens: 9 }, 'input from message_start, output from message_delta')

  t.equal(fake.requests.length, 1)
  const rec = fake.requests[0]!
  t.equal(rec.path, '/v1/messages')
  t.equal(rec.status, 200)
  t.equal(rec.headers['x-api-key'], KEY)
  t.equal(rec.headers['anthropic-version'], '2023-06-01')
  t.notOk('authorization' in rec.headers, 'the key goes in x-api-key only')
  t.equal(rec.body.stream, true)
  t.equal(rec.body.model, 'claude-sonnet-4-5')
  t.equal(rec.body.max_tokens, 256)
  t.notOk('system' in rec.body, 'no system key without a system prompt')
  t.notOk('tools' in rec.body, 'no tools key when none are offered')
})

t.test('a configured anthropic-version is sent', async (t) => {
  const { fake, client } = await setup(t, { version: '2024-01-01' })
  await client.complete(req())
  t.equal(fake.requests[0]!.headers['anthropic-version'], '2024-01-01')
})

t.test('parallel tool use with fragmented input JSON', async (t) => {
  const { fake, client } = await setup(t)
  const weather = { city: 'Paris', units: 'metric', days: [1, 2, 3], nested: { a: 'b "quoted" \\ slash' } }
  const time = { tz: 'Europe/Paris' }
  fake.enqueue({
    text: 'Checking both.',
    chunkSize: 3,
    toolCalls: [{ id: 'toolu_w', name: 'get_weather', input: weather }, { id: 'toolu_t', name: 'get_time', input: time }],
    usage: { input_tokens: 30, output_tokens: 20 },
  })
  const deltas: string[] = []
  const res = await client.complete(req({ tools: TOOLS }), (d) => deltas.push(d.text))
  t.same(res.content, [
    { type: 'text', text: 'Checking both.' },
    { type: 'tool_use', id: 'toolu_w', name: 'get_weather', input: weather },
    { type: 'tool_use', id: 'toolu_t', name: 'get_time', input: time },
  ])
  t.equal(res.stopReason, 'tool_use')
  t.equal(deltas.join(''), 'Checking both.', 'only text is streamed as deltas')
  t.same(res.usage, { input_tokens: 30, output_tokens: 20 })

  t.same(fake.requests[0]!.body.tools, [
    { name: 'get_weather', description: 'Weather for a city', input_schema: TOOLS[0]!.input_schema },
    { name: 'get_time', input_schema: TOOLS[1]!.input_schema },
  ])
})

t.test('tool use without text, input split into single characters', async (t) => {
  const { fake, client } = await setup(t)
  fake.enqueue({ chunkSize: 1, toolCalls: [{ id: 'toolu_1', name: 'get_time', input: { tz: 'UTC' } }, { id: 'toolu_2', name: 'get_time', input: {} }] })
  const res = await client.complete(req({ tools: TOOLS }))
  t.same(res.content, [
    { type: 'tool_use', id: 'toolu_1', name: 'get_time', input: { tz: 'UTC' } },
    { type: 'tool_use', id: 'toolu_2', name: 'get_time', input: {} },
  ])
  t.equal(res.stopReason, 'tool_use')
})

// ---- history translation ----------------------------------------------------------

const MULTI_STEP: Message[] = [
  user('What is the weather in Paris, and the time?'),
  {
    role: 'assistant',
    content: [
      { type: 'text', text: 'Let me check.' },
      { type: 'tool_use', id: 'toolu_w', name: 'get_weather', input: { city: 'Paris' } },
      { type: 'tool_use', id: 'toolu_t', name: 'get_time', input: { tz: 'Europe/Paris' } },
    ],
  },
  {
    role: 'user',
    content: [
      { type: 'tool_result', tool_use_id: 'toolu_w', content: '18C, cloudy' },
      { type: 'tool_result', tool_use_id: 'toolu_t', content: [{ type: 'text', text: 'clock unavailable' }], is_error: true },
    ],
  },
  { role: 'assistant', content: [{ type: 'text', text: 'It is 18C; the time is unknown.' }] },
  { role: 'assistant', content: [{ type: 'text', text: '' }] }, // empty: dropped
  user('Thanks.'),
  { role: 'user', content: [] }, // empty: dropped
  user('And tomorrow?'), // same role as the previous one: merged
]

t.test('multi-step history is translated and accepted by the server', async (t) => {
  const { fake, client } = await setup(t)
  const before = structuredClone(MULTI_STEP)
  const res = await client.complete(req({ system: 'You are terse.', messages: MULTI_STEP, tools: TOOLS, maxTokens: 1024 }))
  const rec = fake.requests[0]!
  t.equal(rec.rejected, undefined, 'the fake validated tool_use/tool_result pairing and accepted the request')
  t.equal(rec.status, 200)
  t.same(MULTI_STEP, before, 'the canonical history is not mutated')
  t.same(res.content, [{ type: 'text', text: 'echo: Thanks.And tomorrow?' }])

  t.equal(rec.body.system, 'You are terse.', 'system is top-level')
  t.equal(rec.body.max_tokens, 1024)
  t.equal(rec.headers['anthropic-version'], '2023-06-01')
  t.equal(rec.headers['x-api-key'], KEY)
  t.same(rec.body.messages, [
    { role: 'user', content: [{ type: 'text', text: 'What is the weather in Paris, and the time?' }] },
    MULTI_STEP[1],
    MULTI_STEP[2],
    { role: 'assistant', content: [{ type: 'text', text: 'It is 18C; the time is unknown.' }] },
    { role: 'user', content: [{ type: 'text', text: 'Thanks.' }, { type: 'text', text: 'And tomorrow?' }] },
  ], 'empty messages dropped, consecutive user messages merged, is_error kept')
})

t.test('user text sent before the tool results is reordered after them', async (t) => {
  const { fake, client } = await setup(t)
  const messages: Message[] = [
    user('go'),
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_a', name: 'get_time', input: {} }] },
    user('(note: be quick)'),
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_a', content: 'noon' }] },
  ]
  await client.complete(req({ messages, tools: TOOLS }))
  const rec = fake.requests[0]!
  t.equal(rec.rejected, undefined)
  t.same(rec.body.messages, [
    { role: 'user', content: [{ type: 'text', text: 'go' }] },
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_a', name: 'get_time', input: {} }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_a', content: 'noon' }, { type: 'text', text: '(note: be quick)' }] },
  ])
})

t.test('a history with an unanswered tool_use is refused (400, not retried)', async (t) => {
  const { fake, client } = await setup(t)
  const messages: Message[] = [
    user('go'),
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_a', name: 'get_time', input: {} }] },
    user('never mind'),
  ]
  const err = await caught(client.complete(req({ messages })))
  if (isCode(t, err, 'PROVIDER_ERROR')) t.equal(err.data?.status, 400)
  t.equal(fake.requests.length, 1)
  t.ok(fake.requests[0]!.rejected)
})

t.test('images in user input become base64 / url image sources', async (t) => {
  const { fake, client } = await setup(t)
  const data = Buffer.from('fake png bytes').toString('base64')
  const messages: Message[] = [{
    role: 'user',
    content: [
      { type: 'text', text: 'What is in these pictures?' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data } },
      { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
    ],
  }]
  await client.complete(req({ messages }))
  const rec = fake.requests[0]!
  t.equal(rec.rejected, undefined)
  t.same(rec.body.messages, [{
    role: 'user',
    content: [
      { type: 'text', text: 'What is in these pictures?' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data } },
      { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
    ],
  }])
})

// ---- HTTP errors ----------------------------------------------------------------------

t.test('429 with retry-after: 0, then success', async (t) => {
  const { fake, client } = await setup(t)
  fake.enqueue({ status: 429, headers: { 'retry-after': '0' } }, { text: 'ok' })
  const res = await client.complete(req())
  t.same(res.content, [{ type: 'text', text: 'ok' }])
  t.same(fake.requests.map((r) => r.status), [429, 200])
})

t.test('500 on every attempt → PROVIDER_ERROR after maxRetries', async (t) => {
  const { fake, client } = await setup(t)
  const step: FakeStep = { status: 500, errorMessage: 'upstream exploded' }
  fake.enqueue(step, step, step, { text: 'must not be reached' })
  const err = await caught(client.complete(req()))
  if (isCode(t, err, 'PROVIDER_ERROR')) {
    t.match(err.message, /upstream exploded/)
    t.match(err.message, /500/)
    t.same(err.data, { provider: 'anthropic', status: 500 })
  }
  t.equal(fake.requests.length, 3, '1 attempt + 2 retries')
  t.equal(fake.pending(), 1)
})

t.test('529 overloaded is retried', async (t) => {
  const { fake, client } = await setup(t)
  fake.enqueue({ status: 529 }, { text: 'ok' })
  const res = await client.complete(req())
  t.same(res.content, [{ type: 'text', text: 'ok' }])
  t.same(fake.requests.map((r) => r.status), [529, 200])
})

t.test('400 is not retried', async (t) => {
  const { fake, client } = await setup(t)
  fake.enqueue({ status: 400, errorMessage: 'bad parameter' }, { text: 'must not be reached' })
  const err = await caught(client.complete(req()))
  if (isCode(t, err, 'PROVIDER_ERROR')) {
    t.match(err.message, /bad parameter/)
    t.equal(err.data?.status, 400)
  }
  t.equal(fake.requests.length, 1)
})

t.test('401 for a wrong api key', async (t) => {
  const { fake, client } = await setup(t, { clientKey: 'sk-ant-wrong' })
  const err = await caught(client.complete(req()))
  if (isCode(t, err, 'PROVIDER_ERROR')) t.equal(err.data?.status, 401)
  t.equal(fake.requests.length, 1)
  t.equal(fake.requests[0]!.status, 401)
})

t.test('connection refused → PROVIDER_ERROR after retries', async (t) => {
  const port = await closedPort()
  const { http, client } = await setup(t, { baseUrl: `http://127.0.0.1:${port}` })
  let attempts = 0
  http.dispatcher.on('connectionError', () => attempts++)
  const err = await caught(client.complete(req()))
  if (isCode(t, err, 'PROVIDER_ERROR')) t.equal(err.data?.provider, 'anthropic')
  t.equal(attempts, 3, '1 attempt + 2 retries')
})

// ---- timeouts and malformed streams -------------------------------------------------------

t.test('no response headers → PROVIDER_TIMEOUT', async (t) => {
  const { fake, client } = await setup(t)
  fake.enqueue({ hang: 'headers' })
  const err = await caught(client.complete(req()))
  isCode(t, err, 'PROVIDER_TIMEOUT')
})

t.test('stream stalls mid-body → PROVIDER_TIMEOUT', async (t) => {
  const { fake, client } = await setup(t)
  fake.enqueue({ text: 'this will never finish', hang: 'body' })
  const err = await caught(client.complete(req()))
  isCode(t, err, 'PROVIDER_TIMEOUT')
  t.equal(fake.requests.length, 1, 'a started stream is never replayed')
})

for (const malformed of ['bad_json', 'truncated', 'no_terminator'] as const) {
  t.test(`malformed stream (${malformed}) → PROVIDER_ERROR, never a partial success`, async (t) => {
    const { fake, client } = await setup(t)
    fake.enqueue({ text: 'a reasonably long answer that arrives in many chunks', chunkSize: 4, malformed })
    const err = await caught(client.complete(req()))
    isCode(t, err, 'PROVIDER_ERROR')
    t.equal(fake.requests.length, 1)
  })
}

t.test('tool input that is not JSON (not cut off) → PROVIDER_ERROR', async (t) => {
  const { fake, client } = await setup(t)
  fake.enqueue({ toolCalls: [{ id: 'toolu_x', name: 'get_time', input: {}, rawArguments: '{"tz": UTC}' }] })
  const err = await caught(client.complete(req({ tools: TOOLS })))
  isCode(t, err, 'PROVIDER_ERROR')
})

t.test('an error event mid-stream → PROVIDER_ERROR carrying its message', async (t) => {
  const ev = (data: Record<string, unknown>) => `event: ${String(data.type)}\ndata: ${JSON.stringify(data)}\n\n`
  const url = await sseServer(t, [
    ev({ type: 'message_start', message: { id: 'm1', type: 'message', role: 'assistant', content: [], usage: { input_tokens: 3, output_tokens: 1 } } }),
    ev({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
    ev({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'par' } }),
    ev({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }),
  ])
  const { client } = await setup(t, { baseUrl: url })
  const err = await caught(client.complete(req()))
  if (isCode(t, err, 'PROVIDER_ERROR')) {
    t.match(err.message, /Overloaded/)
    t.match(err.message, /overloaded_error/)
  }
})

// ---- max_tokens cut-off --------------------------------------------------------------------

t.test('cut off by max_tokens mid tool input: the incomplete call is dropped', async (t) => {
  const { fake, client } = await setup(t)
  fake.enqueue({
    toolCalls: [{ id: 'toolu_cut', name: 'get_weather', input: {}, rawArguments: '{"city":"Par' }],
    stopReason: 'max_tokens',
  })
  const res = await client.complete(req({ tools: TOOLS }))
  t.same(res.content, [])
  t.equal(res.stopReason, 'max_tokens')

  fake.enqueue({
    text: 'Let me look that up.',
    toolCalls: [{ id: 'toolu_cut2', name: 'get_weather', input: {}, rawArguments: '{"city":' }],
    stopReason: 'max_tokens',
  })
  const res2 = await client.complete(req({ tools: TOOLS }))
  t.same(res2.content, [{ type: 'text', text: 'Let me look that up.' }])
  t.equal(res2.stopReason, 'max_tokens')
})

t.test('plain text cut off by max_tokens', async (t) => {
  const { fake, client } = await setup(t)
  fake.enqueue({ text: 'an unfinished sen', stopReason: 'max_tokens' })
  const res = await client.complete(req())
  t.same(res.content, [{ type: 'text', text: 'an unfinished sen' }])
  t.equal(res.stopReason, 'max_tokens')
})

// ---- abort -----------------------------------------------------------------------------------

t.test('abort while chunks are delayed → rejects with exactly the reason, quickly', async (t) => {
  const { fake, client } = await setup(t)
  fake.enqueue({ text: 'x'.repeat(40), chunkSize: 2, delayMs: 60 }) // ~1.5 s if left alone
  const ac = new AbortController()
  const reason = new Error('interrupted by the test')
  let abortedAt = 0
  const deltas: string[] = []
  const err = await caught(client.complete(req({ signal: ac.signal }), (d) => {
    deltas.push(d.text)
    if (abortedAt === 0) {
      abortedAt = performance.now()
      ac.abort(reason)
    }
  }))
  t.equal(err, reason)
  t.ok(performance.now() - abortedAt < 200, 'rejects promptly')
  t.ok(deltas.length < 5, 'the stream stopped')
})

for (const hang of ['headers', 'body'] as const) {
  t.test(`abort while the server hangs (${hang}) → rejects with exactly the reason`, async (t) => {
    const { fake, client } = await setup(t)
    fake.enqueue({ text: 'stalled', hang })
    const ac = new AbortController()
    const reason = { why: 'user pressed stop' }
    const started = performance.now()
    setTimeout(() => ac.abort(reason), 50)
    const err = await caught(client.complete(req({ signal: ac.signal })))
    t.equal(err, reason)
    t.ok(performance.now() - started < 250, 'well before the provider timeouts')
    t.equal(fake.requests.length, 1)
  })
}

t.test('an already-aborted signal rejects with its reason and sends nothing', async (t) => {
  const { fake, client } = await setup(t)
  const ac = new AbortController()
  const reason = new Error('already gone')
  ac.abort(reason)
  const err = await caught(client.complete(req({ signal: ac.signal })))
  t.equal(err, reason)
  t.equal(fake.requests.length, 0)
})
