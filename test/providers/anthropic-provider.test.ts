// AnthropicProvider's wire: the request it sends (headers, body, tools) and the translation of
// canonical histories, validated by the fake Anthropic server like the real API. The behaviour
// shared by every provider (streaming, errors, retry, timeouts, aborts) is the LLM client
// contract, run in anthropic.contract.test.ts.
import t, { type Test } from 'tap'
import type { Message } from '../../src/core/messages.js'
import { AnthropicProvider } from '../../src/providers/anthropic-provider.js'
import { KEY, startSubject, TOOLS, user } from '../contract/llm-client.contract.js'
import { caught, isCode } from '../helpers/errors.js'
import { sseServer } from '../helpers/servers.js'
import { ANTHROPIC } from './subjects.js'

const setup = (t: Test, o?: { origin?: string }) => startSubject(t, ANTHROPIC, o)

// ---- the request -------------------------------------------------------------------------

t.test('the request: key in x-api-key, the default anthropic-version, a streaming Messages body', async (t) => {
  const { fake, client, req } = await setup(t)
  await client.complete(req())
  const rec = fake.requests[0]!
  t.equal(rec.path, '/v1/messages')
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
  const { fake, http } = await setup(t)
  const client = new AnthropicProvider(http, {
    baseUrl: fake.url,
    apiKey: KEY,
    defaultModel: 'anthropic:claude-sonnet-4-5',
    version: '2024-01-01',
  })
  await client.complete({ model: 'claude-sonnet-4-5', maxTokens: 16, messages: [user('hi')] })
  t.equal(fake.requests[0]!.headers['anthropic-version'], '2024-01-01')
})

t.test('tools are sent as name, description and input_schema', async (t) => {
  const { fake, client, req } = await setup(t)
  await client.complete(req({ tools: TOOLS }))
  t.same(fake.requests[0]!.body.tools, [
    { name: 'get_weather', description: 'Weather for a city', input_schema: TOOLS[0]!.input_schema },
    { name: 'get_time', input_schema: TOOLS[1]!.input_schema },
  ])
})

t.test('an error event names its type in the message', async (t) => {
  const url = await sseServer(t, ANTHROPIC.errorMidStream('Overloaded'))
  const { client, req } = await setup(t, { origin: url })
  const err = await caught(client.complete(req()))
  if (isCode(t, err, 'PROVIDER_ERROR')) t.match(err.message, /anthropic stream error: Overloaded \(overloaded_error\)/)
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
  const { fake, client, req } = await setup(t)
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
  t.same(
    rec.body.messages,
    [
      { role: 'user', content: [{ type: 'text', text: 'What is the weather in Paris, and the time?' }] },
      MULTI_STEP[1],
      MULTI_STEP[2],
      { role: 'assistant', content: [{ type: 'text', text: 'It is 18C; the time is unknown.' }] },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Thanks.' },
          { type: 'text', text: 'And tomorrow?' },
        ],
      },
    ],
    'empty messages dropped, consecutive user messages merged, is_error kept',
  )
})

t.test('user text sent before the tool results is reordered after them', async (t) => {
  const { fake, client, req } = await setup(t)
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
    {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_a', content: 'noon' },
        { type: 'text', text: '(note: be quick)' },
      ],
    },
  ])
})

t.test('images in user input become base64 / url image sources', async (t) => {
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
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data } },
        { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
      ],
    },
  ])
})
