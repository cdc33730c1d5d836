// Model settings (docs/api.md, "Model settings"): per turn and as session defaults, on the wire of
// both real provider clients (against the fake provider, which checks them as the real APIs do),
// structured output checked and returned parsed, and what the offline provider honours.
import t from 'tap'
import { startBurrow } from '../../helpers/harness.js'

const LOOKUP = { name: 'lookup', input_schema: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } }
const ANSWER = {
  type: 'json_schema',
  json_schema: {
    name: 'answer',
    strict: true,
    schema: {
      type: 'object',
      properties: { city: { type: 'string' }, celsius: { type: 'number' } },
      required: ['city', 'celsius'],
      additionalProperties: false,
    },
  },
}

t.test('model settings through the real provider clients', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb' }, { fake: true })
  t.teardown(() => h.close())
  const { api, fake } = h
  const last = () => fake.requests.at(-1)!

  t.test('openai: per-turn settings over session defaults, on the Chat Completions wire', async (t) => {
    const id = await api.createSession({
      model: 'openai:gpt-4o-mini',
      tools: [LOOKUP],
      model_settings: { temperature: 0.2, top_p: 0.9, stop: ['END'] },
    })
    const view = await api.get(`/v1/sessions/${id}`)
    t.same(view.body.model_settings, { temperature: 0.2, top_p: 0.9, stop: ['END'] })
    fake.enqueue({ api: 'openai', text: 'plain' })
    await api.turn(id, { input: 'hi' })
    t.match(last().body, { temperature: 0.2, top_p: 0.9, stop: ['END'] })
    t.notOk('tool_choice' in last().body, 'no tool_choice unless asked')

    fake.enqueue({ api: 'openai', toolCalls: [{ id: 'c1', name: 'lookup', input: { q: 'x' } }] })
    const r = await api.turn(id, {
      input: 'look it up',
      temperature: 1.5,
      max_tokens: 50,
      tool_choice: { type: 'tool', name: 'lookup' },
      reasoning_effort: 'low',
    })
    t.equal(r.body.status, 'requires_action')
    const sent = last().body
    t.match(sent, { temperature: 1.5, top_p: 0.9, max_tokens: 50, reasoning_effort: 'low' })
    t.same(sent.tool_choice, { type: 'function', function: { name: 'lookup' } })
    const events = (await api.get(`/v1/sessions/${id}/event-log?after=0&limit=1000`)).body.events
    const started = events.filter((e: any) => e.type === 'turn_started').at(-1)
    t.same(started.data.settings, {
      temperature: 1.5,
      max_tokens: 50,
      tool_choice: { type: 'tool', name: 'lookup' },
      reasoning_effort: 'low',
    })

    // The continuation runs with the paused turn's settings; a forced tool applies to a turn's first call only.
    fake.enqueue({ api: 'openai', text: 'done' })
    const done = await api.turn(id, { tool_results: [{ tool_call_id: 'c1', content: 'found' }] })
    t.equal(done.body.status, 'completed')
    t.match(last().body, { temperature: 1.5, max_tokens: 50, reasoning_effort: 'low' })
    t.notOk('tool_choice' in last().body, 'the call after a forced one is auto')
  })

  t.test('anthropic: stop_sequences, tool_choice any, output_config effort and format', async (t) => {
    const id = await api.createSession({ model: 'anthropic:claude-sonnet-4-5', tools: [LOOKUP] })
    fake.enqueue({ api: 'anthropic', text: '{"city":"Oslo","celsius":-3.5}' })
    const r = await api.turn(id, {
      input: 'weather?',
      temperature: 0.5,
      stop: ['###'],
      tool_choice: 'required',
      reasoning_effort: 'minimal',
      response_format: ANSWER,
    })
    t.equal(r.status, 200)
    t.same(r.body.output_json, { city: 'Oslo', celsius: -3.5 })
    const sent = last().body
    t.match(sent, { temperature: 0.5, stop_sequences: ['###'], tool_choice: { type: 'any' } })
    t.same(sent.output_config, { effort: 'low', format: { type: 'json_schema', schema: ANSWER.json_schema.schema } })
    const events = (await api.get(`/v1/sessions/${id}/event-log?after=0&limit=1000`)).body.events
    t.same(events.at(-1).data.output_json, { city: 'Oslo', celsius: -3.5 }, 'turn_completed carries the parsed answer')

    const hot = await api.turn(id, { input: 'x', temperature: 1.5 })
    t.equal(hot.status, 400)
    t.match(hot.body, { code: 'INVALID_REQUEST', field: 'body/temperature' })
    t.match(hot.body.detail, /at most 1 for anthropic/)
  })

  t.test('structured output: an answer that does not match fails the turn, which the next one survives', async (t) => {
    const id = await api.createSession({ model: 'openai:gpt-4o-mini', model_settings: { response_format: ANSWER } })
    fake.enqueue({ api: 'openai', text: '{"city":"Oslo"}' })
    const r = await api.turn(id, { input: 'weather?' })
    t.equal(r.status, 502)
    t.match(r.body, { code: 'PROVIDER_ERROR', data: { reason: 'response_format_mismatch' } })
    t.match(r.body.detail, /must have required property 'celsius'/)
    t.same(last().body.response_format, ANSWER, 'sent as the native structured output')
    fake.enqueue({ api: 'openai', text: 'not json at all' })
    const r2 = await api.turn(id, { input: 'again?' })
    t.match(r2.body, { code: 'PROVIDER_ERROR', detail: /not JSON/ })
    fake.enqueue({ api: 'openai', text: '{"city":"Bergen","celsius":4}' })
    const ok = await api.turn(id, { input: 'once more' })
    t.equal(ok.status, 200)
    t.same(ok.body.output_json, { city: 'Bergen', celsius: 4 })
    const view = (await api.get(`/v1/sessions/${id}`)).body
    t.equal(view.messages.at(-1).content[0].text, '{"city":"Bergen","celsius":4}')
    t.equal(view.turn_count, 3)
  })

  t.test("a schema's pattern cannot stall the service: it runs in linear time on the model's answer", async (t) => {
    // With a backtracking engine this pattern takes ~2^n steps on n a's and a mismatch at the end: minutes here.
    const EVIL = {
      type: 'json_schema',
      json_schema: {
        name: 'code',
        schema: { type: 'object', properties: { code: { type: 'string', pattern: '^(a+)+$' } }, required: ['code'] },
      },
    }
    const id = await api.createSession({ model: 'openai:gpt-4o-mini' })
    fake.enqueue({ api: 'openai', text: JSON.stringify({ code: `${'a'.repeat(48)}!` }) })
    const t0 = performance.now()
    const r = await api.turn(id, { input: 'code?', response_format: EVIL })
    t.ok(performance.now() - t0 < 5000, 'answered at once')
    t.match(r.body, { code: 'PROVIDER_ERROR', data: { reason: 'response_format_mismatch' } })
    t.match(r.body.detail, /must match pattern/)
    fake.enqueue({ api: 'openai', text: JSON.stringify({ code: 'a'.repeat(48) }) })
    const ok = await api.turn(id, { input: 'code?', response_format: EVIL })
    t.same(ok.body.output_json, { code: 'a'.repeat(48) }, 'a matching answer passes')
  })

  t.test('bad settings are INVALID_REQUEST before anything is recorded', async (t) => {
    const id = await api.createSession({ model: 'openai:gpt-4o-mini' })
    const before = (await api.get(`/v1/sessions/${id}`)).body.last_seq
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ tool_choice: 'required' }, 'body/tool_choice'],
      [{ tool_choice: { type: 'tool', name: 'nope' } }, 'body/tool_choice/name'],
      [
        { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: 3 } } } },
        'body/response_format/json_schema/schema',
      ],
      [
        { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $async: true, type: 'object' } } } },
        'body/response_format/json_schema/schema',
      ],
      [
        {
          response_format: {
            type: 'json_schema',
            json_schema: { name: 'x', schema: { type: 'object', $ref: 'https://example.com/s.json' } },
          },
        },
        'body/response_format/json_schema/schema',
      ],
      [
        // Patterns run on RE2 (linear time): no lookaround, no backreferences.
        {
          response_format: {
            type: 'json_schema',
            json_schema: { name: 'x', schema: { type: 'object', properties: { code: { type: 'string', pattern: '^(?!x)' } } } },
          },
        },
        'body/response_format/json_schema/schema',
      ],
      [{ temperature: 2.5 }, 'body/temperature'],
      [{ stop: ['a', 'b', 'c', 'd', 'e'] }, 'body/stop'],
      [{ reasoning_effort: 'extreme' }, 'body/reasoning_effort'],
      [{ on_busy: 'wait' }, 'body/on_busy'],
    ]
    for (const [extra, field] of cases) {
      const r = await api.turn(id, { input: 'hi', ...extra })
      t.equal(r.status, 400, JSON.stringify(extra))
      t.match(r.body, { code: 'INVALID_REQUEST', field }, JSON.stringify(extra))
    }
    t.equal((await api.get(`/v1/sessions/${id}`)).body.last_seq, before, 'nothing was recorded')
    const bad = await api.post('/v1/sessions', { model: 'anthropic:claude-sonnet-4-5', model_settings: { temperature: 1.2 } })
    t.match(bad.body, { code: 'INVALID_REQUEST', field: 'body/model_settings/temperature' })
  })

  t.test('PATCH merges the defaults (null removes one); the next turn runs with them', async (t) => {
    const id = await api.createSession({ model: 'openai:gpt-4o-mini', tools: [LOOKUP], model_settings: { temperature: 0.3, stop: ['X'] } })
    const p = await api.patch(`/v1/sessions/${id}`, { model_settings: { temperature: null, top_p: 0.5, tool_choice: 'none' } })
    t.equal(p.status, 200)
    t.same(p.body.model_settings, { stop: ['X'], top_p: 0.5, tool_choice: 'none' })
    fake.enqueue({ api: 'openai', text: 'ok' })
    await api.turn(id, { input: 'hi' })
    const sent = last().body
    t.notOk('temperature' in sent)
    t.match(sent, { top_p: 0.5, stop: ['X'], tool_choice: 'none' })
    const dropTool = await api.patch(`/v1/sessions/${id}`, { tools: [], model_settings: { tool_choice: { type: 'tool', name: 'lookup' } } })
    t.match(
      dropTool.body,
      { code: 'INVALID_REQUEST', field: 'body/model_settings/tool_choice/name' },
      'defaults are checked against the new tools',
    )
  })
})

t.test('the offline provider honours what it can deterministically', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb' })
  t.teardown(() => h.close())
  const { api } = h
  const id = await api.createSession({ tools: [LOOKUP] })

  const stopped = await api.turn(id, { input: 'one two STOP three', stop: ['STOP'] })
  t.match(stopped.body, { output_text: 'echo: one two ', stop_reason: 'stop_sequence' })

  const none = await api.turn(id, { input: '/tool lookup {"q":"a"}', tool_choice: 'none' })
  t.match(none.body, { status: 'completed', output_text: 'echo: /tool lookup {"q":"a"}' })

  const forced = await api.turn(id, { input: 'find cats', tool_choice: 'required' })
  t.match(forced.body, { status: 'requires_action', tool_calls: [{ name: 'lookup', input: { q: 'find cats' } }] })
  const answered = await api.turn(id, { tool_results: [{ tool_call_id: forced.body.tool_calls[0].id, content: 'many' }] })
  t.match(answered.body, { status: 'completed', output_text: 'tool result: many' })

  const shaped = await api.turn(id, { input: 'Oslo', response_format: ANSWER })
  t.equal(shaped.status, 200)
  t.same(shaped.body.output_json, { city: 'echo: Oslo', celsius: 0 })

  // max_tokens: four characters a token, as the usage it reports counts them.
  const long = 'word '.repeat(40).trim()
  const cut = await api.turn(id, { input: long, max_tokens: 5 })
  t.match(cut.body, {
    status: 'completed',
    output_text: `echo: ${long}`.slice(0, 20),
    stop_reason: 'max_tokens',
    usage: { output_tokens: 5 },
  })
  const fits = await api.turn(id, { input: 'short', max_tokens: 5 })
  t.match(fits.body, { output_text: 'echo: short', stop_reason: 'end_turn' })
  const defaults = await api.patch(`/v1/sessions/${id}`, { model_settings: { max_tokens: 3 } })
  t.equal(defaults.status, 200)
  const byDefault = await api.turn(id, { input: long })
  t.match(byDefault.body, { output_text: 'echo: word w', stop_reason: 'max_tokens' }, 'the session default applies')
  // Half a JSON answer is not the schema's: the turn fails as a real model's truncated answer would.
  const halfJson = await api.turn(id, { input: 'Oslo', response_format: ANSWER })
  t.match(halfJson.body, { code: 'PROVIDER_ERROR' })
})
