// ProviderHttp: retry before the first byte (status codes, connection errors), backoff with
// full jitter and Retry-After, timeouts, abort during backoff, error descriptions.
import { getEventListeners } from 'node:events'
import { createServer as createNetServer, type AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import type { LlmRequest } from '../../src/core/llm.js'
import { AnthropicProvider } from '../../src/providers/anthropic-provider.js'
import { OpenAiProvider } from '../../src/providers/openai-provider.js'
import { ProviderHttp, type ProviderHttpOptions } from '../../src/providers/provider-http.js'
import { caught, isCode } from '../helpers/errors.js'
import { startFakeLlm, type FakeLlmServer } from '../helpers/fake-llm-server.js'
import { gaps, scriptedServer, type Reply } from '../helpers/servers.js'

const HTTP: ProviderHttpOptions = {
  headersTimeoutMs: 500,
  idleTimeoutMs: 300,
  connectTimeoutMs: 1000,
  maxRetries: 2,
  retryBaseMs: 5,
  retryMaxMs: 50,
}

const req = (extra: Partial<LlmRequest> = {}): LlmRequest => ({
  model: 'gpt-4o-mini',
  maxTokens: 64,
  messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
  ...extra,
})

function newHttp(t: Test, o: Partial<ProviderHttpOptions> = {}): ProviderHttp {
  const http = new ProviderHttp({ ...HTTP, ...o })
  t.teardown(() => http.close())
  return http
}

async function withFake(
  t: Test,
  o: Partial<ProviderHttpOptions> = {},
): Promise<{ fake: FakeLlmServer; http: ProviderHttp; openai: OpenAiProvider }> {
  const fake = await startFakeLlm()
  const http = new ProviderHttp({ ...HTTP, ...o })
  t.teardown(async () => {
    await fake.close()
    await http.close()
  })
  const openai = new OpenAiProvider(http, { baseUrl: fake.url + '/v1', apiKey: 'k', defaultModel: 'openai:gpt-4o-mini' })
  return { fake, http, openai }
}

/** Pins Math.random (the backoff jitter) for the rest of the test. */
function fixRandom(t: Test, value: number): void {
  const original = Math.random
  Math.random = () => value
  t.teardown(() => {
    Math.random = original
  })
}

// ---- which failures are retried --------------------------------------------------------------

t.test('retryable statuses are retried once, then succeed', async (t) => {
  for (const status of [408, 429, 500, 502, 503, 504, 529]) {
    const { fake, openai } = await withFake(t)
    fake.enqueue({ status }, { text: 'ok' })
    const res = await openai.complete(req())
    t.same(res.content, [{ type: 'text', text: 'ok' }], `${status} then success`)
    t.same(
      fake.requests.map((r) => r.status),
      [status, 200],
    )
  }
})

t.test('other error statuses are not retried', async (t) => {
  for (const status of [400, 401, 403, 404, 413, 422]) {
    const { fake, openai } = await withFake(t)
    fake.enqueue({ status, errorMessage: `nope ${status}` }, { text: 'must not be reached' })
    const err = await caught(openai.complete(req()))
    if (isCode(t, err, 'PROVIDER_ERROR')) {
      // 400/413/422 refuse the request itself: marked so the turn is rolled back out of the history.
      t.same(err.data, { provider: 'openai', status, ...([400, 413, 422].includes(status) ? { rejected: true } : {}) })
      t.match(err.message, `nope ${status}`)
    }
    t.equal(fake.requests.length, 1, `${status}: one attempt`)
  }
})

t.test('maxRetries bounds the attempts', async (t) => {
  for (const maxRetries of [0, 1, 3]) {
    const { fake, openai } = await withFake(t, { maxRetries })
    for (let i = 0; i < 5; i++) fake.enqueue({ status: 503 })
    const err = await caught(openai.complete(req()))
    if (isCode(t, err, 'PROVIDER_ERROR')) t.equal(err.data?.status, 503)
    t.equal(fake.requests.length, maxRetries + 1, `maxRetries ${maxRetries}`)
  }
})

t.test('a connection reset before any response byte is retried', async (t) => {
  let connections = 0
  const server = createNetServer((socket) => {
    connections++
    socket.on('data', () => socket.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const http = newHttp(t)
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
  const client = new OpenAiProvider(http, { baseUrl: url, apiKey: 'k', defaultModel: 'openai:x' })
  const err = await caught(client.complete(req()))
  isCode(t, err, 'PROVIDER_ERROR')
  t.equal(connections, 3, '1 attempt + 2 retries')
})

t.test('a stream that has started is never replayed', async (t) => {
  const { fake, openai } = await withFake(t)
  fake.enqueue({ text: 'cut off half way through', chunkSize: 3, malformed: 'truncated' }, { text: 'must not be reached' })
  const err = await caught(openai.complete(req()))
  isCode(t, err, 'PROVIDER_ERROR')
  t.equal(fake.requests.length, 1)
  t.equal(fake.pending(), 1)
})

// ---- backoff ----------------------------------------------------------------------------------

t.test('exponential backoff without Retry-After (jitter pinned at its maximum)', async (t) => {
  fixRandom(t, 0.999999)
  const http = newHttp(t, { maxRetries: 3, retryBaseMs: 40, retryMaxMs: 1000 })
  const { url, seen } = await scriptedServer(t, [{ status: 500 }, { status: 500 }, { status: 500 }])
  const res = await http.postJson('test', url, {}, { a: 1 })
  t.equal(res.statusCode, 200)
  await res.body.dump()
  const g = gaps(seen)
  t.equal(g.length, 3)
  for (const [i, expected] of [40, 80, 160].entries()) {
    t.ok(g[i]! >= expected - 3, `gap ${i} ≈ ${Math.round(g[i]!)}ms ≥ ${expected}ms`)
    t.ok(g[i]! < expected + 120, `gap ${i} ≈ ${Math.round(g[i]!)}ms is not much more than ${expected}ms`)
  }
})

t.test('backoff is capped by retryMaxMs', async (t) => {
  fixRandom(t, 0.999999)
  const http = newHttp(t, { maxRetries: 2, retryBaseMs: 100, retryMaxMs: 120 })
  const { url, seen } = await scriptedServer(t, [{ status: 503 }, { status: 503 }])
  const res = await http.postJson('test', url, {}, {})
  await res.body.dump()
  const g = gaps(seen)
  t.ok(g[1]! >= 117, `second gap ${Math.round(g[1]!)}ms ≥ 120ms`)
  t.ok(g[1]! < 195, `second gap ${Math.round(g[1]!)}ms is capped (uncapped would be 200ms)`)
})

t.test('full jitter: the random draw scales the wait', async (t) => {
  fixRandom(t, 0)
  const http = newHttp(t, { maxRetries: 2, retryBaseMs: 300, retryMaxMs: 1000 })
  const { url, seen } = await scriptedServer(t, [{ status: 503 }, { status: 503 }])
  const started = performance.now()
  const res = await http.postJson('test', url, {}, {})
  await res.body.dump()
  t.equal(seen.length, 3)
  t.ok(performance.now() - started < 250, 'a zero draw waits (almost) nothing')
})

t.test('Retry-After (seconds) is honoured', async (t) => {
  fixRandom(t, 0)
  const http = newHttp(t, { retryMaxMs: 1000 })
  const { url, seen } = await scriptedServer(t, [{ status: 429, headers: { 'retry-after': '0.2' } }])
  const res = await http.postJson('test', url, {}, {})
  await res.body.dump()
  const g = gaps(seen)
  t.ok(g[0]! >= 197, `waited ${Math.round(g[0]!)}ms ≥ 200ms`)
  t.ok(g[0]! < 450)
})

t.test('Retry-After as an HTTP date is honoured, capped by retryMaxMs', async (t) => {
  fixRandom(t, 0)
  const http = newHttp(t, { retryMaxMs: 150 })
  const future = new Date(Date.now() + 5000).toUTCString()
  const past = new Date(Date.now() - 60_000).toUTCString()
  const { url, seen } = await scriptedServer(t, [
    { status: 503, headers: { 'retry-after': future } },
    { status: 503, headers: { 'retry-after': past } },
  ])
  const res = await http.postJson('test', url, {}, {})
  await res.body.dump()
  const g = gaps(seen)
  t.ok(g[0]! >= 147, `future date: waited ${Math.round(g[0]!)}ms (the cap)`)
  t.ok(g[0]! < 1000, 'not the full 5 s')
  t.ok(g[1]! < 100, `past date: waited ${Math.round(g[1]!)}ms`)
})

t.test('a huge Retry-After is capped by retryMaxMs', async (t) => {
  const http = newHttp(t, { retryMaxMs: 50 })
  const { url, seen } = await scriptedServer(t, [{ status: 429, headers: { 'retry-after': '30' } }])
  const started = performance.now()
  const res = await http.postJson('test', url, {}, {})
  await res.body.dump()
  t.equal(seen.length, 2)
  t.ok(performance.now() - started < 500)
})

t.test('abort during the backoff sleep rejects with exactly the reason, at once', async (t) => {
  const http = newHttp(t, { retryMaxMs: 10_000 })
  const { url, seen } = await scriptedServer(t, [{ status: 503, headers: { 'retry-after': '10' } }])
  const ac = new AbortController()
  const reason = new Error('interrupted during backoff')
  let abortedAt = 0
  setTimeout(() => {
    abortedAt = performance.now()
    ac.abort(reason)
  }, 50)
  const err = await caught(http.postJson('test', url, {}, {}, ac.signal))
  t.equal(err, reason)
  t.ok(abortedAt > 0 && performance.now() - abortedAt < 100, 'did not sleep on')
  t.equal(seen.length, 1)
})

t.test('an already-aborted signal sends nothing', async (t) => {
  const http = newHttp(t)
  const { url, seen } = await scriptedServer(t, [])
  const reason = { stop: true }
  const err = await caught(http.postJson('test', url, {}, {}, AbortSignal.abort(reason)))
  t.equal(err, reason)
  t.equal(seen.length, 0)
})

// ---- timeouts ----------------------------------------------------------------------------------

t.test('no response headers in time → PROVIDER_TIMEOUT, not retried', async (t) => {
  const { fake, openai } = await withFake(t, { headersTimeoutMs: 200 })
  fake.enqueue({ hang: 'headers' }, { text: 'must not be reached' })
  const err = await caught(openai.complete(req()))
  if (isCode(t, err, 'PROVIDER_TIMEOUT')) t.same(err.data, { provider: 'openai' })
  t.equal(fake.requests.length, 1)
})

// (A stalled body → PROVIDER_TIMEOUT is covered per provider.)
t.test('a slow but steady stream is not an idle one', async (t) => {
  const { fake, openai } = await withFake(t, { idleTimeoutMs: 200 })
  fake.enqueue({ text: 'abcdefghij', chunkSize: 2, delayMs: 40 })
  const res = await openai.complete(req())
  t.same(res.content, [{ type: 'text', text: 'abcdefghij' }])
})

t.test('a long-lived signal reused across many calls and retries keeps no abort listeners', async (t) => {
  const { fake, http, openai } = await withFake(t)
  const anthropic = new AnthropicProvider(http, { baseUrl: fake.url, apiKey: 'k', defaultModel: 'anthropic:claude-sonnet-4-5' })
  const ac = new AbortController()
  const warnings: string[] = []
  const onWarning = (w: Error) => warnings.push(w.name)
  process.on('warning', onWarning)
  t.teardown(() => void process.off('warning', onWarning))
  let most = 0
  for (let i = 0; i < 12; i++) {
    fake.enqueue({ status: 429, headers: { 'retry-after': '0' } })
    await openai.complete(req({ signal: ac.signal }))
    await anthropic.complete(req({ model: 'claude-sonnet-4-5', signal: ac.signal }))
    most = Math.max(most, getEventListeners(ac.signal, 'abort').length)
  }
  t.equal(fake.requests.length, 36)
  t.ok(most <= 1, `at most the last call's listener is still attached (saw ${most})`)
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.equal(getEventListeners(ac.signal, 'abort').length, 0, 'and it goes once the call has settled')
  t.same(warnings, [])
})

// ---- errors and requests ------------------------------------------------------------------------

t.test('error descriptions come from the body', async (t) => {
  const http = newHttp(t, { maxRetries: 0 })
  const cases: Array<[Reply, RegExp]> = [
    [
      { status: 502, headers: { 'content-type': 'text/plain' }, body: 'Bad gateway from the proxy' },
      /HTTP 502: Bad gateway from the proxy/,
    ],
    [{ status: 400, body: '{"error":"a plain string error"}' }, /HTTP 400: a plain string error/],
    [{ status: 400, body: '{"error":{"message":"nested message","type":"x"}}' }, /HTTP 400: nested message/],
    [{ status: 422, body: '{"message":"top-level message"}' }, /HTTP 422: top-level message/],
    [{ status: 500, body: '' }, /HTTP 500: \(empty body\)/],
  ]
  for (const [reply, expected] of cases) {
    const { url } = await scriptedServer(t, [reply])
    const err = await caught(http.postJson('acme', url, {}, {}))
    if (isCode(t, err, 'PROVIDER_ERROR')) {
      t.match(err.message, expected)
      t.same(err.data, { provider: 'acme', status: reply.status, ...([400, 413, 422].includes(reply.status!) ? { rejected: true } : {}) })
    }
  }
  const { url } = await scriptedServer(t, [{ status: 418, body: 'teapot' }])
  const err = await caught(http.postJson('acme', url, {}, {}, undefined, (status, text) => `custom ${status}/${text}`))
  if (isCode(t, err, 'PROVIDER_ERROR')) t.match(err.message, /HTTP 418: custom 418\/teapot/)
})

t.test('postJson sends JSON with the given headers and returns the unread body', async (t) => {
  const http = newHttp(t)
  const { url, seen } = await scriptedServer(t, [{ status: 200, body: '{"hello":"world"}' }])
  const res = await http.postJson('test', url, { 'x-custom': 'yes' }, { n: 1, s: 'two' })
  t.equal(res.statusCode, 200)
  t.same(await res.body.json(), { hello: 'world' })
  t.same(JSON.parse(seen[0]!.body), { n: 1, s: 'two' })
  t.equal(seen[0]!.headers['content-type'], 'application/json')
  t.match(seen[0]!.headers.accept, /text\/event-stream/)
  t.equal(seen[0]!.headers['x-custom'], 'yes')
})

t.test('one ProviderHttp serves both providers concurrently', async (t) => {
  const { fake, http, openai } = await withFake(t)
  const anthropic = new AnthropicProvider(http, { baseUrl: fake.url, apiKey: 'k', defaultModel: 'anthropic:claude-sonnet-4-5' })
  fake.enqueue({ api: 'anthropic', text: 'from anthropic', delayMs: 20 }, { api: 'openai', text: 'from openai', delayMs: 20 })
  const [a, o] = await Promise.all([anthropic.complete(req({ model: 'claude-sonnet-4-5' })), openai.complete(req())])
  t.same(a.content, [{ type: 'text', text: 'from anthropic' }])
  t.same(o.content, [{ type: 'text', text: 'from openai' }])
  t.same(fake.requests.map((r) => r.api).sort(), ['anthropic', 'openai'])
})

t.test('after close() a call fails with PROVIDER_ERROR', async (t) => {
  const fake = await startFakeLlm()
  t.teardown(() => fake.close())
  const http = new ProviderHttp(HTTP)
  const openai = new OpenAiProvider(http, { baseUrl: fake.url + '/v1', apiKey: 'k', defaultModel: 'openai:x' })
  await openai.complete(req())
  await http.close()
  const err = await caught(openai.complete(req()))
  isCode(t, err, 'PROVIDER_ERROR')
  t.equal(fake.requests.length, 1)
})
