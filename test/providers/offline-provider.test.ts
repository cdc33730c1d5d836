// OfflineProvider: the deterministic, network-free provider.
import t from 'tap'
import { COMPACTION_PROMPT } from '../../src/core/compactor.js'
import type { LlmDelta, LlmRequest, LlmResponse } from '../../src/core/llm.js'
import { checkHistory, type Message, type ToolDefinition } from '../../src/core/messages.js'
import { OfflineProvider } from '../../src/providers/offline-provider.js'
import { estimateTokens } from '../../src/providers/wire-helpers.js'
import { caught } from '../helpers/errors.js'

const user = (text: string): Message => ({ role: 'user', content: [{ type: 'text', text }] })
const assistant = (text: string): Message => ({ role: 'assistant', content: [{ type: 'text', text }] })
const req = (extra: Partial<LlmRequest> = {}): LlmRequest => ({ model: 'echo', maxTokens: 256, messages: [user('hi')], ...extra })
const TOOLS: ToolDefinition[] = [
  { name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
  { name: 'noop', input_schema: { type: 'object' } },
]

async function run(client: OfflineProvider, r: LlmRequest): Promise<{ res: LlmResponse; deltas: LlmDelta[] }> {
  const deltas: LlmDelta[] = []
  const res = await client.complete(r, (d) => deltas.push(d))
  return { res, deltas }
}

t.test('identity', async (t) => {
  const client = new OfflineProvider()
  t.equal(client.provider, 'offline')
  t.equal(client.offline, true)
  t.equal(client.defaultModel, 'offline:echo')
})

t.test('echoes the last user text; deltas concatenate to it; usage is positive', async (t) => {
  const client = new OfflineProvider()
  const messages = [user('first question'), assistant('first answer'), user('the quick  brown fox\njumps')]
  const { res, deltas } = await run(client, req({ system: 'be nice', messages }))
  const text = 'echo: the quick  brown fox\njumps'
  t.same(res.content, [{ type: 'text', text }])
  t.equal(res.stopReason, 'end_turn')
  t.ok(deltas.length > 1, 'streamed in several pieces')
  t.ok(deltas.every((d) => d.type === 'text'))
  t.equal(deltas.map((d) => d.text).join(''), text)
  t.ok(res.usage.input_tokens > 0)
  t.ok(res.usage.output_tokens > 0)
})

t.test('an empty history still answers', async (t) => {
  const { res } = await run(new OfflineProvider(), req({ messages: [] }))
  t.same(res.content, [{ type: 'text', text: 'echo: ' }])
  t.ok(res.usage.output_tokens > 0)
})

t.test('deterministic across runs and instances', async (t) => {
  const r = req({ messages: [user('same input, same output')], tools: TOOLS })
  const a = await run(new OfflineProvider(), r)
  const b = await run(new OfflineProvider(), r)
  const c = await run(new OfflineProvider(), r)
  t.same(b, a)
  t.same(c, a)
  const ta = await run(new OfflineProvider(), req({ messages: [user('/tool get_weather {"city":"Oslo"}')], tools: TOOLS }))
  const tb = await run(new OfflineProvider(), req({ messages: [user('/tool get_weather {"city":"Oslo"}')], tools: TOOLS }))
  t.same(tb, ta, 'tool ids too')
})

t.test('/tool name {json} calls an offered tool', async (t) => {
  const client = new OfflineProvider()
  const messages = [user('/tool get_weather {"city": "Paris", "days": [1, 2]}')]
  const { res, deltas } = await run(client, req({ messages, tools: TOOLS }))
  t.equal(res.stopReason, 'tool_use')
  t.equal(res.content.length, 1)
  const use = res.content[0]!
  t.match(use, { type: 'tool_use', name: 'get_weather', input: { city: 'Paris', days: [1, 2] } })
  t.type(use.type === 'tool_use' && use.id, 'string')
  t.same(deltas, [], 'nothing to stream')
  t.ok(res.usage.output_tokens > 0)
  // the answer forms a valid history once its result comes back
  const id = use.type === 'tool_use' ? use.id : ''
  const history: Message[] = [
    ...messages,
    { role: 'assistant', content: res.content },
    {
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: id, content: 'sunny' }],
    },
  ]
  t.equal(checkHistory(history), null)
})

t.test('/tool without arguments, and with non-JSON arguments', async (t) => {
  const client = new OfflineProvider()
  const bare = await client.complete(req({ messages: [user('/tool noop')], tools: TOOLS }))
  t.match(bare.content, [{ type: 'tool_use', name: 'noop', input: {} }])
  const loose = await client.complete(req({ messages: [user('/tool noop not json at all')], tools: TOOLS }))
  t.match(loose.content, [{ type: 'tool_use', name: 'noop', input: { text: 'not json at all' } }])
})

t.test('/tool for a tool that is not offered is just echoed', async (t) => {
  const client = new OfflineProvider()
  const line = '/tool delete_everything {"really": true}'
  const none = await client.complete(req({ messages: [user(line)] }))
  t.same(none.content, [{ type: 'text', text: `echo: ${line}` }])
  t.equal(none.stopReason, 'end_turn')
  const other = await client.complete(req({ messages: [user(line)], tools: TOOLS }))
  t.same(other.content, [{ type: 'text', text: `echo: ${line}` }])
})

t.test('a tool-results message yields a text answer', async (t) => {
  const client = new OfflineProvider()
  const messages: Message[] = [
    user('go'),
    {
      role: 'assistant',
      content: [
        { type: 'tool_use', id: 'a', name: 'get_weather', input: { city: 'Paris' } },
        { type: 'tool_use', id: 'b', name: 'noop', input: {} },
      ],
    },
    {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'a', content: 'sunny, 21C' },
        { type: 'tool_result', tool_use_id: 'b', content: [{ type: 'text', text: 'exploded' }], is_error: true },
      ],
    },
  ]
  const { res, deltas } = await run(client, req({ messages, tools: TOOLS }))
  t.equal(res.stopReason, 'end_turn')
  t.equal(res.content.length, 1)
  const block = res.content[0]!
  t.equal(block.type, 'text')
  const text = block.type === 'text' ? block.text : ''
  t.match(text, /sunny, 21C/)
  t.match(text, /exploded/)
  t.equal(deltas.map((d) => d.text).join(''), text)
})

t.test('a compaction request yields an extractive summary within the token budget', async (t) => {
  const client = new OfflineProvider()
  const history: Message[] = []
  for (let i = 0; i < 30; i++) {
    history.push(user(`Question number ${i} about the deployment. It has a second sentence that must not appear.`))
    history.push(assistant(`Answer number ${i} is settled! More detail follows here.`))
  }
  const request = (maxTokens: number) => req({ maxTokens, messages: [...history, user(`${COMPACTION_PROMPT}\n\nSummarise now.`)] })

  for (const maxTokens of [40, 100, 300]) {
    const { res, deltas } = await run(client, request(maxTokens))
    t.equal(res.content.length, 1)
    const block = res.content[0]!
    const summary = block.type === 'text' ? block.text : ''
    t.ok(estimateTokens(summary) <= maxTokens, `summary of ~${estimateTokens(summary)} tokens fits maxTokens ${maxTokens}`)
    t.ok(res.usage.output_tokens <= maxTokens, 'reported output fits the budget')
    t.notOk(summary.includes('CONTEXT COMPACTION'), 'the prompt itself is not summarised')
    t.notOk(summary.includes('second sentence'), 'first sentences only')
    t.notOk(summary.includes('echo:'))
    t.match(summary, /Answer number 29 is settled!/, 'the newest message survives')
    t.equal(deltas.map((d) => d.text).join(''), summary)
  }

  const { res: small } = await run(client, request(40))
  const { res: large } = await run(client, request(2000))
  const text = (r: LlmResponse) => (r.content[0]?.type === 'text' ? r.content[0].text : '')
  t.ok(text(large).length > text(small).length, 'a larger budget keeps more')
  t.match(text(large), /Question number 0 about the deployment\./, 'a large enough budget keeps the oldest too')
  t.ok(text(large).indexOf('Question number 0') < text(large).indexOf('Answer number 29'), 'oldest first')
})

t.test('abort: rejects with exactly the reason', async (t) => {
  const client = new OfflineProvider()
  const pre = new AbortController()
  const reason1 = new Error('already aborted')
  pre.abort(reason1)
  t.equal(await caught(client.complete(req({ signal: pre.signal }))), reason1)

  const mid = new AbortController()
  const reason2 = { interrupted: true }
  const deltas: string[] = []
  const err = await caught(
    client.complete(req({ signal: mid.signal, messages: [user('one two three four five six')] }), (d) => {
      deltas.push(d.text)
      if (deltas.length === 2) mid.abort(reason2)
    }),
  )
  t.equal(err, reason2)
  t.equal(deltas.length, 2, 'no delta after the abort')

  const timed = new AbortController()
  const reason3 = new Error('timer abort')
  setImmediate(() => timed.abort(reason3))
  const long = 'word '.repeat(200)
  t.equal(await caught(client.complete(req({ signal: timed.signal, messages: [user(long)] }))), reason3, 'interruptible between chunks')
})
