// The agent loop on its own: a live session, a scripted LLM client, no service, no store.
import { compileAnswerSchema } from '../../src/surfaces/request-validation.js'
import t from 'tap'
import { createLogger } from '../../src/app/logger.js'
import { BurrowError } from '../../src/core/errors.js'
import type { EventEnvelope } from '../../src/core/events.js'
import { checkHistory } from '../../src/core/messages.js'
import { NO_TELEMETRY } from '../../src/core/telemetry.js'
import type { BuiltinTool } from '../../src/core/tools.js'
import { Turn, type TurnStart } from '../../src/session/turn.js'
import { TurnRunner, type TurnRunnerDeps } from '../../src/session/turn-runner.js'
import { call, calls, liveSession, registry, say, ScriptedClient, sessionConfig } from './fixtures.js'

const echoTool: BuiltinTool = {
  definition: { name: 'shout', description: 'Upper-cases its text.', input_schema: { type: 'object' } },
  enabledFor: () => true,
  execute: async (input) => ({ content: String((input as { text?: string }).text ?? '').toUpperCase() }),
}

function runner(client: ScriptedClient, extra: Partial<TurnRunnerDeps> = {}) {
  return new TurnRunner({
    providers: registry(client),
    builtinTools: [echoTool],
    maxSteps: 8,
    defaultMaxTokens: 256,
    schemas: compileAnswerSchema,
    telemetry: NO_TELEMETRY,
    logger: createLogger('silent'),
    ...extra,
  })
}

const input = (text: string): TurnStart => ({ kind: 'input', input: [{ type: 'text', text }], settings: {}, effective: {} })
const types = (events: EventEnvelope[]) => events.map((e) => e.type)

t.test('a final answer ends the turn; its result is the turn seen from its caller', async (t) => {
  const client = new ScriptedClient([say('hello back', { input_tokens: 7, output_tokens: 3 })])
  const { session, committed } = liveSession()
  const r = await runner(client).run(Turn.starting(session, input('hello'), null), input('hello'))
  t.same(types(committed), ['turn_started', 'assistant_message', 'turn_completed'])
  t.match(r, {
    turn: 1,
    status: 'completed',
    output_text: 'hello back',
    first_seq: 2,
    last_seq: 4,
    stop_reason: 'end_turn',
    usage: { input_tokens: 7, output_tokens: 3 },
  })
  t.same(
    r.messages.map((m) => m.role),
    ['user', 'assistant'],
  )
  t.match(committed.at(-1), { type: 'turn_completed', data: { output_text: 'hello back', usage: { input_tokens: 7, output_tokens: 3 } } })
  t.equal(client.requests[0]!.maxTokens, 256, 'the default max tokens')
  t.equal(session.record.open_turn, null)
})

t.test('watched live, the model is called once the turn start is published, and the sink gets every event and delta', async (t) => {
  let release!: () => void
  const first = new Promise<void>((r) => {
    release = r
  })
  let batches = 0
  const client = new ScriptedClient([say('streamed')])
  const { session } = liveSession(sessionConfig(), { commit: () => (batches++ === 0 ? first : undefined) })
  const seen: EventEnvelope[] = []
  const turn = Turn.starting(session, input('hi'), (e) => seen.push(e))
  session.running = turn
  const done = runner(client).run(turn, input('hi'))
  await new Promise((r) => setImmediate(r))
  t.equal(client.requests.length, 0, 'not before the start is durable and published')
  t.same(seen, [], 'nothing published before it is stored')
  release()
  const r = await done
  t.equal(client.requests.length, 1)
  t.same(types(seen), ['turn_started', 'text_delta', 'assistant_message', 'turn_completed'])
  t.match(seen[1], { type: 'text_delta', seq: 2, data: { text: 'streamed' } }, 'a delta carries the seq of the last stored event')
  t.equal(r.status, 'completed')
})

t.test('built-in tools run inside the loop; an unknown tool is answered with an error; the model sees the results', async (t) => {
  const client = new ScriptedClient([
    calls({ id: 'c1', name: 'shout', input: { text: 'quiet' } }, { id: 'c2', name: 'ghost', input: {} }),
    say('done'),
  ])
  const { session, committed } = liveSession()
  const r = await runner(client).run(Turn.starting(session, input('go'), null), input('go'))
  t.same(types(committed), [
    'turn_started',
    'assistant_message',
    'tool_call',
    'tool_call',
    'tool_result',
    'tool_result',
    'assistant_message',
    'turn_completed',
  ])
  const results = committed.filter((e): e is EventEnvelope<'tool_result'> => e.type === 'tool_result').map((e) => e.data)
  t.match(results, [
    { tool_call_id: 'c1', content: 'QUIET', is_error: false },
    { tool_call_id: 'c2', is_error: true, content: /Unknown tool: ghost/ },
  ])
  t.same(client.requests[1]!.tools, ['shout'], 'the built-in tool is offered')
  t.equal(r.output_text, 'done')
  t.equal(checkHistory(session.record.messages), null)
})

t.test('client tools pause the turn; mixed with built-in ones, those run first; the results continue the same turn', async (t) => {
  const cfg = sessionConfig({ tools: [{ name: 'lookup', input_schema: { type: 'object' } }] })
  const client = new ScriptedClient([
    calls({ id: 'b1', name: 'shout', input: { text: 'x' } }, { id: 'k1', name: 'lookup', input: { q: 1 } }),
  ])
  const { session, committed } = liveSession(cfg)
  const loop = runner(client)
  const paused = await loop.run(Turn.starting(session, input('find'), null), input('find'))
  t.match(paused, { status: 'requires_action', stop_reason: 'tool_use', tool_calls: [{ id: 'k1', name: 'lookup', input: { q: 1 } }] })
  t.same(types(committed).slice(-2), ['tool_result', 'turn_requires_action'], 'the built-in result first, then the pause')
  t.equal(session.record.open_turn!.state, 'requires_action')

  client.push(say('found it'))
  const results: TurnStart = { kind: 'tool_results', results: [{ tool_call_id: 'k1', content: 'the answer' }], settings: {}, effective: {} }
  const resumed = await loop.run(Turn.starting(session, results, null), results)
  t.match(resumed, { turn: 1, status: 'completed', first_seq: paused.last_seq + 1, output_text: 'found it' })
  t.same(
    resumed.messages.map((m) => m.role),
    ['user', 'assistant'],
    'the messages of this run: the tool results, then the answer',
  )
  t.equal(checkHistory(session.record.messages), null)
})

t.test('the loop ends a turn after max_steps calls', async (t) => {
  const client = new ScriptedClient([call('shout', { text: 'a' }, 'x1'), call('shout', { text: 'b' }, 'x2'), say('never asked')])
  const { session } = liveSession()
  const r = await runner(client, { maxSteps: 2 }).run(Turn.starting(session, input('loop'), null), input('loop'))
  t.match(r, { status: 'completed', stop_reason: 'max_steps' })
  t.equal(client.requests.length, 2)
})

t.test('a spent budget stops the turn before its next call', async (t) => {
  const client = new ScriptedClient([{ ...call('shout', { text: 'a' }), usage: { input_tokens: 20, output_tokens: 5 } }])
  const { session, committed } = liveSession(sessionConfig({ max_total_tokens: 25 }))
  const err = await runner(client)
    .run(Turn.starting(session, input('spend'), null), input('spend'))
    .catch((e: unknown) => e)
  t.match(err, { code: 'BUDGET_EXCEEDED', data: { turn: 1, first_seq: 2 } })
  t.match(committed.at(-1), { type: 'turn_failed', data: { code: 'BUDGET_EXCEEDED' } })
  t.equal(client.requests.length, 1)
})

t.test('a failing provider ends the turn as failed; the history stays valid for the next turn', async (t) => {
  const cfg = sessionConfig({ tools: [{ name: 'lookup', input_schema: { type: 'object' } }] })
  const client = new ScriptedClient([call('shout', { text: 'a' }), new BurrowError('PROVIDER_ERROR', 'upstream said no')])
  const { session, committed } = liveSession(cfg)
  const loop = runner(client)
  const err = await loop.run(Turn.starting(session, input('try'), null), input('try')).catch((e: unknown) => e)
  t.match(err, { code: 'PROVIDER_ERROR', message: 'upstream said no', data: { turn: 1, first_seq: 2, last_seq: session.record.last_seq } })
  t.match(committed.at(-1), { type: 'turn_failed', data: { code: 'PROVIDER_ERROR' } })
  t.equal(session.record.open_turn, null)
  t.equal(checkHistory(session.record.messages), null)
  client.push(say('better now'))
  t.equal((await loop.run(Turn.starting(session, input('again'), null), input('again'))).turn, 2)
})

t.test('an input the provider rejects is rolled back out of the history', async (t) => {
  const client = new ScriptedClient([new BurrowError('PROVIDER_ERROR', 'bad image', { rejected: true })])
  const { session, committed } = liveSession()
  await runner(client)
    .run(Turn.starting(session, input('look'), null), input('look'))
    .catch(() => undefined)
  t.match(committed.at(-1), { type: 'turn_failed', data: { reason: 'input_rejected', rejected_seq_range: [2, 2] } })
  t.same(session.record.messages, [], 'never sent again')
})

t.test('an interrupted turn fails with INTERRUPTED and its pending tool calls get synthetic results', async (t) => {
  const { session, committed } = liveSession()
  let turn!: Turn
  const stopper: BuiltinTool = {
    definition: { name: 'wait', input_schema: { type: 'object' } },
    enabledFor: () => true,
    execute: async () => {
      turn.signal.abort(new BurrowError('INTERRUPTED', 'stop now'))
      throw new Error('cut short')
    },
  }
  const client = new ScriptedClient([calls({ id: 'w1', name: 'wait', input: {} }, { id: 'w2', name: 'shout', input: { text: 'x' } })])
  turn = Turn.starting(session, input('long'), null)
  const err = await runner(client, { builtinTools: [stopper, echoTool] })
    .run(turn, input('long'))
    .catch((e: unknown) => e)
  t.match(err, { code: 'INTERRUPTED', message: 'stop now', data: { turn: 1 } })
  const closing = committed.slice(-3)
  t.match(
    closing,
    [
      { type: 'tool_result', data: { tool_call_id: 'w1', is_error: true, synthetic: true } },
      { type: 'tool_result', data: { tool_call_id: 'w2', is_error: true, synthetic: true } },
      { type: 'turn_failed', data: { code: 'INTERRUPTED' } },
    ],
    'no tool call is left without its result',
  )
  t.equal(checkHistory(session.record.messages), null)
})

t.test('a provider aborted by the signal rejects with its reason: the turn is INTERRUPTED', async (t) => {
  const { session, committed } = liveSession()
  let turn!: Turn
  const client = new ScriptedClient([
    async (req) => {
      turn.signal.abort(new BurrowError('INTERRUPTED', 'stop now'))
      throw req.signal!.reason
    },
  ])
  turn = Turn.starting(session, input('long'), null)
  t.match(
    await runner(client)
      .run(turn, input('long'))
      .catch((e: unknown) => e),
    { code: 'INTERRUPTED', message: 'stop now' },
  )
  t.match(committed.at(-1), { type: 'turn_failed', data: { code: 'INTERRUPTED' } })
})

t.test('the system prompt: the session’s own, the memory guide when memory is on, then the pinned notes', async (t) => {
  const loop = runner(new ScriptedClient(), { memoryGuide: 'Use memory.' })
  const { session } = liveSession(sessionConfig({ system_prompt: 'Be brief.', memory: true }))
  t.equal(loop.systemPrompt(session.record), 'Be brief.\n\nUse memory.')
  session.emit(0, [{ type: 'note_set', data: { key: 'city', value: 'Rome', by: 'client' } }])
  t.match(loop.systemPrompt(session.record), /^Be brief\.\n\nUse memory\.\n\nSession notes .*\n- city: Rome$/s)
  const plain = liveSession(sessionConfig({ system_prompt: 'Plain.' })).session
  t.equal(loop.systemPrompt(plain.record), 'Plain.', 'no guide without memory')
})

t.test('the hook before an LLM call runs before every call except a session’s first', async (t) => {
  const hooked: number[] = []
  const client = new ScriptedClient([call('shout', { text: 'a' }), say('one'), say('two')])
  const { session } = liveSession()
  const loop = runner(client, {
    beforeLlmCall: async (turn) => {
      hooked.push(turn.number)
    },
  })
  await loop.run(Turn.starting(session, input('1'), null), input('1'))
  t.same(hooked, [1], 'not before the first call, before the second')
  await loop.run(Turn.starting(session, input('2'), null), input('2'))
  t.same(hooked, [1, 2])
})
