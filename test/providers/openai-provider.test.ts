// OpenAiProvider's wire: the request it sends (auth, body, tools) and the translation of
// canonical histories, validated by the fake OpenAI server like the real API. The behaviour
// shared by every provider (streaming, errors, retry, timeouts, aborts) is the LLM client
// contract, run in openai.contract.test.ts.
import t, { type Test } from 'tap'
import type { Message } from '../../src/core/messages.js'
import { OpenAiProvider } from '../../src/providers/openai-provider.js'
import { ProviderHttp } from '../../src/providers/provider-http.js'
import { CONTRACT_HTTP as HTTP, KEY, startSubject, TOOLS, user } from '../contract/llm-client.contract.js'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { OPENAI } from './subjects.js'

const setup = (t: Test) => startSubject(t, OPENAI)

// ---- the request -------------------------------------------------------------------------

t.test('the request: Bearer key, a streaming Chat Completions body asking for usage', async (t) => {
  const { fake, client, req } = await setup(t)
  await client.complete(req())
  const rec = fake.requests[0]!
  t.equal(rec.path, '/v1/chat/completions')
  t.equal(rec.headers.authorization, `Bearer ${KEY}`)
  t.equal(rec.body.stream, true)
  t.same(rec.body.stream_options, { include_usage: true })
  t.equal(rec.body.model, 'gpt-4o-mini')
  t.equal(rec.body.max_tokens, 256)
  t.notOk('max_completion_tokens' in rec.body)
  t.notOk('tools' in rec.body, 'no tools key when none are offered')
})

t.test('reasoning models get max_completion_tokens instead of max_tokens', async (t) => {
  const { fake, client, req } = await setup(t)
  await client.complete(req({ model: 'o3-mini', maxTokens: 77 }))
  const body = fake.requests[0]!.body
  t.equal(body.max_completion_tokens, 77)
  t.notOk('max_tokens' in body)
})

t.test('no Authorization header without an api key (compatible servers)', async (t) => {
  const fake = await startFakeLlm()
  const http = new ProviderHttp(HTTP)
  t.teardown(async () => {
    await fake.close()
    await http.close()
  })
  const client = new OpenAiProvider(http, { baseUrl: fake.url + '/v1/', defaultModel: 'openai:local' })
  const res = await client.complete({ model: 'local', maxTokens: 16, messages: [user('ping')] })
  t.same(res.content, [{ type: 'text', text: 'echo: ping' }])
  t.equal(fake.requests[0]!.headers.authorization, undefined)
  t.equal(fake.requests[0]!.path, '/v1/chat/completions', 'a trailing slash on baseUrl is tolerated')
})

t.test('tools are sent as functions with parameters', async (t) => {
  const { fake, client, req } = await setup(t)
  await client.complete(req({ tools: TOOLS }))
  t.same(fake.requests[0]!.body.tools, [
    { type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: TOOLS[0]!.input_schema } },
    { type: 'function', function: { name: 'get_time', parameters: TOOLS[1]!.input_schema } },
  ])
})

// ---- history translation ----------------------------------------------------------

const MULTI_STEP: Message[] = [
  user('What is the weather in Paris, and the time?'),
  {
    role: 'assistant',
    content: [
      { type: 'text', text: 'Let me check.' },
      { type: 'tool_use', id: 'call_w', name: 'get_weather', input: { city: 'Paris' } },
      { type: 'tool_use', id: 'call_t', name: 'get_time', input: { tz: 'Europe/Paris' } },
    ],
  },
  {
    role: 'user',
    content: [
      { type: 'tool_result', tool_use_id: 'call_w', content: '18C, cloudy' },
      { type: 'tool_result', tool_use_id: 'call_t', content: [{ type: 'text', text: 'clock unavailable' }], is_error: true },
    ],
  },
  { role: 'assistant', content: [{ type: 'text', text: 'It is 18C; the time is unknown.' }] },
  { role: 'assistant', content: [{ type: 'text', text: '' }] }, // empty: dropped
  user('Thanks.'),
  { role: 'user', content: [] }, // empty: dropped
  user('And tomorrow?'), // same role as the previous one: merged
]

t.test('multi-step history is translated and accepted by the server', async (t) => {
  const { fake, client, req } = await setup(t)
  const before = structuredClone(MULTI_STEP)
  const res = await client.complete(req({ system: 'You are terse.', messages: MULTI_STEP, tools: TOOLS }))
  const rec = fake.requests[0]!
  t.equal(rec.rejected, undefined, 'the fake validated tool-call pairing and accepted the request')
  t.equal(rec.status, 200)
  t.same(MULTI_STEP, before, 'the canonical history is not mutated')
  t.same(res.content, [{ type: 'text', text: 'echo: Thanks.\nAnd tomorrow?' }])

  const messages = rec.body.messages as any[]
  t.same(
    messages.map((m) => m.role),
    ['system', 'user', 'assistant', 'tool', 'tool', 'assistant', 'user'],
  )
  t.same(messages[0], { role: 'system', content: 'You are terse.' })
  t.same(messages[1], { role: 'user', content: 'What is the weather in Paris, and the time?' })
  const asst = messages[2]
  t.equal(asst.content, 'Let me check.')
  t.same(
    asst.tool_calls.map((c: any) => ({ id: c.id, type: c.type, name: c.function.name, args: JSON.parse(c.function.arguments) })),
    [
      { id: 'call_w', type: 'function', name: 'get_weather', args: { city: 'Paris' } },
      { id: 'call_t', type: 'function', name: 'get_time', args: { tz: 'Europe/Paris' } },
    ],
  )
  t.same(messages[3], { role: 'tool', tool_call_id: 'call_w', content: '18C, cloudy' })
  t.equal(messages[4].tool_call_id, 'call_t')
  t.match(messages[4].content, /^\[error\] /, 'the error flag survives in the content')
  t.match(messages[4].content, /clock unavailable/)
  t.same(messages[5], { role: 'assistant', content: 'It is 18C; the time is unknown.' })
  t.same(messages[6], { role: 'user', content: 'Thanks.\nAnd tomorrow?' }, 'consecutive user messages merged')
})

t.test('user text sent before the tool results is reordered after them', async (t) => {
  const { fake, client, req } = await setup(t)
  const messages: Message[] = [
    user('go'),
    { role: 'assistant', content: [{ type: 'tool_use', id: 'call_a', name: 'get_time', input: {} }] },
    user('(note: be quick)'),
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_a', content: 'noon' }] },
  ]
  await client.complete(req({ messages, tools: TOOLS }))
  const rec = fake.requests[0]!
  t.equal(rec.rejected, undefined)
  t.same(rec.body.messages, [
    { role: 'user', content: 'go' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_a', type: 'function', function: { name: 'get_time', arguments: '{}' } }] },
    { role: 'tool', tool_call_id: 'call_a', content: 'noon' },
    { role: 'user', content: '(note: be quick)' },
  ])
})

t.test('images in user input become image_url parts', async (t) => {
  const { fake, client, req } = await setup(t)
  const data = Buffer.from('fake png bytes').toString('base64')
  const messages: Message[] = [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'What is in these pictures?' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data } },
        { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
      ],
    },
  ]
  await client.complete(req({ messages }))
  const rec = fake.requests[0]!
  t.equal(rec.rejected, undefined)
  t.same(rec.body.messages, [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'What is in these pictures?' },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${data}` } },
        { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
      ],
    },
  ])
})
