// OpenAiEmbedder against the fake LLM server's /v1/embeddings (batching, order, vectors,
// auth) and a scripted local server (retry, Retry-After, exhaustion, malformed responses,
// timeouts, aborts).
import t, { type Test } from 'tap'
import type { BurrowError } from '../../src/core/errors.js'
import { embeddingsUrl, OpenAiEmbedder, type OpenAiEmbedderOptions } from '../../src/memory/openai-embedder.js'
import { caught, isCode } from '../helpers/errors.js'
import { embeddingFor, startFakeLlm, type FakeLlmServer } from '../helpers/fake-llm-server.js'
import { closedPort, scriptedServer, type Reply, type Seen } from '../helpers/servers.js'

const FAST = { maxRetries: 2, retryBaseMs: 5, retryMaxMs: 50, timeoutMs: 2000 }

function embedder(t: Test, opts: Partial<OpenAiEmbedderOptions> & { baseUrl: string }): OpenAiEmbedder {
  const e = new OpenAiEmbedder({ model: 'text-embedding-3-small', ...FAST, ...opts })
  t.teardown(() => e.close())
  return e
}

async function fake(t: Test, opts: { openaiKey?: string } = {}): Promise<FakeLlmServer> {
  const f = await startFakeLlm(opts)
  t.teardown(() => f.close())
  return f
}

/**
 * A scripted local server; once the script is spent it answers like the fake (8-dim vectors
 * from `embeddingFor`). Its URL is an API base (`…/v1`).
 */
async function scripted(t: Test, replies: Reply[]): Promise<{ url: string; seen: Seen[] }> {
  const s = await scriptedServer(t, replies, (raw) => ({
    body: {
      object: 'list',
      data: (JSON.parse(raw).input as string[]).map((s, index) => ({ object: 'embedding', index, embedding: embeddingFor(s) })),
    },
  }))
  return { url: `${s.url}/v1`, seen: s.seen }
}

const close = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((x, i) => Math.abs(x - b[i]!) < 1e-6)
const norm = (a: readonly number[]) => Math.sqrt(a.reduce((s, x) => s + x * x, 0))

t.test('embeddingsUrl: /v1 bases, bare origins, full URLs', async (t) => {
  t.equal(embeddingsUrl('https://api.openai.com/v1'), 'https://api.openai.com/v1/embeddings')
  t.equal(embeddingsUrl('http://host:11434/v1/'), 'http://host:11434/v1/embeddings')
  t.equal(embeddingsUrl('http://host:11434'), 'http://host:11434/v1/embeddings')
  t.equal(embeddingsUrl('https://gw.example/openai/v1/embeddings'), 'https://gw.example/openai/v1/embeddings')
  t.equal(embeddingsUrl('https://x.example/api/v1?api-version=2'), 'https://x.example/api/v1/embeddings?api-version=2')
  for (const bad of ['not a url', 'ftp://host/v1', ''])
    isCode(t, await caught((async () => embeddingsUrl(bad))()), 'PROVIDER_NOT_CONFIGURED')
})

t.test('configuration: id, missing model, bad URL, bad batch size', async (t) => {
  const e = embedder(t, { baseUrl: 'http://127.0.0.1:11434/v1', model: 'nomic-embed-text' })
  t.equal(e.id, 'openai:nomic-embed-text@127.0.0.1:11434')
  t.equal(e.url, 'http://127.0.0.1:11434/v1/embeddings')
  t.equal(e.dimensions, 0, 'unknown before the first response')
  t.equal(new OpenAiEmbedder({ baseUrl: 'https://api.openai.com/v1', model: 'm' }).id, 'openai:m@api.openai.com')
  isCode(t, await caught((async () => new OpenAiEmbedder({ baseUrl: 'http://h/v1', model: ' ' }))()), 'PROVIDER_NOT_CONFIGURED')
  isCode(t, await caught((async () => new OpenAiEmbedder({ baseUrl: 'nope', model: 'm' }))()), 'PROVIDER_NOT_CONFIGURED')
  t.throws(() => new OpenAiEmbedder({ baseUrl: 'http://h/v1', model: 'm', batchSize: 0 }), RangeError)
  t.throws(() => new OpenAiEmbedder({ baseUrl: 'http://h/v1', model: 'm', batchSize: 4096 }), RangeError)
})

t.test('init learns the dimensions with one short request', async (t) => {
  const f = await fake(t)
  const e = embedder(t, { baseUrl: f.url + '/v1' })
  t.equal(await e.init(), e)
  t.equal(e.dimensions, 8)
  t.equal(f.requests.length, 1)
  await e.init()
  t.equal(f.requests.length, 1, 'no second probe')
})

t.test("batches of 256, in order, vectors are the fake's normalised vectors", async (t) => {
  const f = await fake(t)
  const e = embedder(t, { baseUrl: f.url + '/v1' })
  const texts = Array.from({ length: 600 }, (_, i) => `passage number ${i}`)
  const vs = await e.embed(texts)
  t.same(
    f.requests.map((r) => r.body.input.length),
    [256, 256, 88],
  )
  t.same(
    f.requests.flatMap((r) => r.body.input),
    texts,
    'every text once, in order',
  )
  for (const r of f.requests) {
    t.equal(r.path, '/v1/embeddings')
    t.equal(r.body.model, 'text-embedding-3-small')
    t.equal(r.body.encoding_format, 'float')
    t.equal(r.headers.authorization, undefined, 'no key, no Authorization header')
  }
  t.equal(vs.length, 600)
  t.ok(
    vs.every((v, i) => close(v, embeddingFor(texts[i]!))),
    'each vector is embeddingFor(text)',
  )
  t.ok(
    vs.every((v) => Math.abs(norm(v) - 1) < 1e-9),
    'unit length',
  )
  t.equal(e.dimensions, 8)
  t.same(await e.embed([]), [], 'no texts, no request')
  t.equal(f.requests.length, 3)
})

t.test('configurable batch size; empty texts are sent as a space', async (t) => {
  const f = await fake(t)
  const e = embedder(t, { baseUrl: f.url + '/v1', batchSize: 2 })
  const vs = await e.embed(['a', '', 'c', 'd', 'e'])
  t.same(
    f.requests.map((r) => r.body.input),
    [['a', ' '], ['c', 'd'], ['e']],
  )
  t.ok(close(vs[1]!, embeddingFor(' ')))
})

t.test("API key as Bearer; a rejected key is PROVIDER_ERROR with the server's message", async (t) => {
  const f = await fake(t, { openaiKey: 'sk-good' })
  const ok = embedder(t, { baseUrl: f.url + '/v1', apiKey: 'sk-good' })
  t.equal((await ok.embed(['x'])).length, 1)
  t.equal(f.requests[0]!.headers.authorization, 'Bearer sk-good')
  const bad = embedder(t, { baseUrl: f.url + '/v1', apiKey: 'sk-bad' })
  const err = await caught(bad.embed(['x']))
  isCode(t, err, 'PROVIDER_ERROR')
  t.match((err as BurrowError).message, /HTTP 401: Incorrect API key provided/)
  t.equal((err as BurrowError).data?.status, 401)
  t.equal(f.requests.length, 2, '401 is not retried')
})

t.test('429 then OK: retried, honouring Retry-After', async (t) => {
  const s = await scripted(t, [{ status: 429, headers: { 'retry-after': '0.2' }, body: { error: { message: 'Rate limit reached' } } }])
  const e = embedder(t, { baseUrl: s.url, retryMaxMs: 1000 })
  const [v] = await e.embed(['hello'])
  t.ok(close(v!, embeddingFor('hello')))
  t.equal(s.seen.length, 2)
  t.ok(s.seen[1]!.at - s.seen[0]!.at >= 190, `waited ${(s.seen[1]!.at - s.seen[0]!.at).toFixed(0)} ms for Retry-After`)
})

t.test("5xx until retries run out: PROVIDER_ERROR with the server's message", async (t) => {
  const fail = { status: 500, body: { error: { message: 'model overloaded', type: 'server_error' } } }
  const s = await scripted(t, [fail, fail, fail, fail])
  const e = embedder(t, { baseUrl: s.url, maxRetries: 2 })
  const err = await caught(e.embed(['x']))
  isCode(t, err, 'PROVIDER_ERROR')
  t.match((err as Error).message, /HTTP 500: model overloaded/)
  t.equal(s.seen.length, 3, 'first attempt + 2 retries')
})

t.test('a 400 is not retried; a plain-text error body is quoted', async (t) => {
  const s = await scripted(t, [{ status: 400, body: 'input too long' }])
  const err = await caught(embedder(t, { baseUrl: s.url }).embed(['x']))
  isCode(t, err, 'PROVIDER_ERROR')
  t.match((err as Error).message, /HTTP 400: input too long/)
  t.equal(s.seen.length, 1)
})

t.test('malformed responses are PROVIDER_ERROR', async (t) => {
  const two = (a: unknown, b: unknown) => ({
    data: [
      { index: 0, embedding: a },
      { index: 1, embedding: b },
    ],
  })
  const cases: Array<[string, unknown]> = [
    ['not JSON', '{"data": [1, 2'],
    ['no data', { object: 'list' }],
    ['wrong count', { data: [{ index: 0, embedding: [1, 0] }] }],
    ['strings in the vector', two([1, 0], ['1', '0'])],
    ['empty vector', two([], [])],
    ['non-finite value', '{"data":[{"index":0,"embedding":[1,0]},{"index":1,"embedding":[1e999,0]}]}'],
    ['dimensions differ', two([1, 0, 0], [1, 0])],
    [
      'repeated index',
      {
        data: [
          { index: 0, embedding: [1, 0] },
          { index: 0, embedding: [0, 1] },
        ],
      },
    ],
    ['zero vector', two([1, 0], [0, 0])],
  ]
  for (const [name, body] of cases) {
    const s = await scripted(t, [{ body }])
    const err = await caught(embedder(t, { baseUrl: s.url }).embed(['a', 'b']))
    isCode(t, err, 'PROVIDER_ERROR')
    t.match((err as Error).message, /malformed response/, name)
    t.equal(s.seen.length, 1, `${name}: not retried`)
  }
})

t.test('a later response of another dimension is PROVIDER_ERROR', async (t) => {
  const s = await scripted(t, [
    { body: { data: [{ index: 0, embedding: [3, 4] }] } },
    { body: { data: [{ index: 0, embedding: [1, 0, 0] }] } },
  ])
  const e = embedder(t, { baseUrl: s.url })
  t.same(await e.embed(['a']), [[0.6, 0.8]])
  t.equal(e.dimensions, 2)
  isCode(t, await caught(e.embed(['b'])), 'PROVIDER_ERROR')
  t.equal(e.dimensions, 2)
})

t.test('order follows `index`; base64 vectors are accepted', async (t) => {
  const b64 = Buffer.from(new Float32Array([0, 2]).buffer).toString('base64')
  const s = await scripted(t, [
    {
      body: {
        data: [
          { index: 1, embedding: b64 },
          { index: 0, embedding: [2, 0] },
        ],
      },
    },
  ])
  t.same(await embedder(t, { baseUrl: s.url }).embed(['a', 'b']), [
    [1, 0],
    [0, 1],
  ])
})

t.test('no answer in time is PROVIDER_TIMEOUT (headers or body)', async (t) => {
  for (const hang of ['headers', 'body'] as const) {
    const s = await scripted(t, [{ hang }])
    const t0 = performance.now()
    const err = await caught(embedder(t, { baseUrl: s.url, timeoutMs: 150 }).embed(['x']))
    isCode(t, err, 'PROVIDER_TIMEOUT')
    t.ok(performance.now() - t0 < 1500, `${hang}: gave up promptly`)
    t.equal(s.seen.length, 1, `${hang}: a timeout is not retried`)
  }
})

t.test('an unreachable endpoint is PROVIDER_ERROR after retries', async (t) => {
  const port = await closedPort()
  const err = await caught(embedder(t, { baseUrl: `http://127.0.0.1:${port}/v1` }).embed(['x']))
  isCode(t, err, 'PROVIDER_ERROR')
  t.match((err as Error).message, /could not be reached/)
})

t.test('abort: before the call, during backoff, during the request', async (t) => {
  const s = await scripted(t, [{ status: 503 }, { status: 503 }, { status: 503 }])
  const e = embedder(t, { baseUrl: s.url, retryBaseMs: 10_000, retryMaxMs: 10_000 })
  const reason = new Error('stop')
  t.equal(await caught(e.embed(['x'], AbortSignal.abort(reason))), reason, 'already aborted')
  t.equal(s.seen.length, 0)

  const ac = new AbortController()
  const t0 = performance.now()
  const p = caught(e.embed(['x'], ac.signal))
  while (s.seen.length < 1) await new Promise((r) => setTimeout(r, 5))
  setTimeout(() => ac.abort(reason), 30)
  t.equal(await p, reason, 'the abort reason, not a BurrowError')
  t.ok(performance.now() - t0 < 2000, 'did not sit out the 10 s backoff')

  const hanging = await scripted(t, [{ hang: 'headers' }])
  const quick = embedder(t, { baseUrl: hanging.url })
  const ac2 = new AbortController()
  const p2 = caught(quick.embed(['x'], ac2.signal))
  while (hanging.seen.length === 0) await new Promise((r) => setTimeout(r, 5))
  ac2.abort(reason)
  t.equal(await p2, reason, 'aborted mid-request')
})
