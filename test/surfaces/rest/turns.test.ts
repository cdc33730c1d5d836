import t from 'tap'
import { MODES, startBurrow, sleep, eventually } from '../../helpers/harness.js'

const WEATHER = {
  name: 'get_weather',
  description: 'Weather for a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}
const CLOCK = { name: 'get_time', input_schema: { type: 'object', properties: {} } }

for (const mode of MODES)
  for (const [provider, model] of [
    ['openai', 'openai:gpt-4o-mini'],
    ['anthropic', 'anthropic:claude-sonnet-4-5'],
  ] as const) {
    t.test(`${mode.name} / ${provider}: turns through the real client against the fake provider`, async (t) => {
      const h = await startBurrow(
        { ...mode.env, BURROW_PROVIDER_TIMEOUT_MS: '400', BURROW_PROVIDER_IDLE_TIMEOUT_MS: '400' },
        { fake: true },
      )
      t.teardown(() => h.close())
      const { api, fake } = h
      const ofProvider = () => fake.requests.filter((r) => r.api === provider)

      t.test('a JSON turn returns the result with wire usage', async (t) => {
        const id = await api.createSession({ model, system_prompt: 'You are terse.' })
        fake.enqueue({ api: provider, text: 'Hello there, friend.', usage: { input_tokens: 21, output_tokens: 7 } })
        const r = await api.turn(id, { input: 'hi' })
        t.equal(r.status, 200)
        t.same(r.body, {
          session_id: id,
          turn: 1,
          status: 'completed',
          output_text: 'Hello there, friend.',
          messages: [
            { role: 'user', content: [{ type: 'text', text: 'hi' }] },
            { role: 'assistant', content: [{ type: 'text', text: 'Hello there, friend.' }] },
          ],
          tool_calls: [],
          usage: { input_tokens: 21, output_tokens: 7, compaction_tokens: 0 },
          stop_reason: 'end_turn',
          first_seq: 2,
          last_seq: 4,
        })
        const sent = ofProvider().at(-1)!.body
        if (provider === 'anthropic') t.equal(sent.system, 'You are terse.')
        else t.same(sent.messages[0], { role: 'system', content: 'You are terse.' })

        fake.enqueue({ api: provider, text: 'Second.' })
        const r2 = await api.turn(id, { input: [{ type: 'text', text: 'again' }], max_tokens: 77 })
        t.equal(r2.body.turn, 2)
        t.equal(r2.body.first_seq, 5)
        const body = ofProvider().at(-1)!.body
        const msgs = provider === 'openai' ? body.messages.filter((m: any) => m.role !== 'system') : body.messages
        t.equal(msgs.length, 3, 'the whole history is sent')
        t.equal(body.max_tokens, 77)
      })

      t.test('an SSE turn streams its events with seq ids; deltas have none', async (t) => {
        const id = await api.createSession({ model })
        fake.enqueue({ api: provider, text: 'one two three four five six', chunkSize: 4 })
        const s = await api.sse(`/v1/sessions/${id}/turns`, { method: 'POST', body: { input: 'count' } })
        t.equal(s.status, 200)
        const frames = await s.until((f) => f.event === 'turn_completed')
        t.equal(frames[0]!.event, 'turn_started')
        t.equal(frames[0]!.id, '2')
        const deltas = frames.filter((f) => f.event === 'text_delta')
        t.ok(deltas.length >= 3, 'several deltas')
        t.ok(
          deltas.every((d) => d.id === undefined && d.data.seq === 2),
          'deltas carry the last stored seq and no id',
        )
        t.equal(deltas.map((d) => d.data.data.text).join(''), 'one two three four five six')
        const stored = frames.filter((f) => f.event !== 'text_delta')
        t.same(
          stored.map((f) => f.event),
          ['turn_started', 'assistant_message', 'turn_completed'],
        )
        t.same(
          stored.map((f) => Number(f.id)),
          [2, 3, 4],
        )
        t.ok(stored.every((f) => f.data.seq === Number(f.id) && f.data.session_id === id && f.data.turn === 1))
        t.equal(frames.at(-1)!.data.data.output_text, 'one two three four five six')
        t.equal(await s.next(), null, 'the stream ends with the turn')
      })

      t.test('client tools pause the turn; tool_results continue it', async (t) => {
        const id = await api.createSession({ model, tools: [WEATHER, CLOCK] })
        fake.enqueue({
          api: provider,
          text: 'Let me check.',
          toolCalls: [
            { name: 'get_weather', input: { city: 'Oslo' } },
            { name: 'get_time', input: {} },
          ],
        })
        const r = await api.turn(id, { input: 'Weather and time in Oslo?' })
        t.equal(r.status, 200)
        t.equal(r.body.status, 'requires_action')
        t.equal(r.body.stop_reason, 'tool_use')
        t.same(
          r.body.tool_calls.map((c: any) => [c.name, c.input]),
          [
            ['get_weather', { city: 'Oslo' }],
            ['get_time', {}],
          ],
        )
        const [w, c] = r.body.tool_calls

        const busy = await api.turn(id, { input: 'something else' })
        t.equal(busy.status, 409)
        t.equal(busy.body.code, 'SESSION_BUSY')
        t.same(busy.body.data.pending_tool_call_ids, [w.id, c.id])

        const bad = [
          [{ tool_results: [{ tool_call_id: 'nope', content: 'x' }] }, 'body/tool_results/0/tool_call_id'],
          [{ tool_results: [{ tool_call_id: w.id, content: '5C' }] }, 'body/tool_results'],
          [
            {
              tool_results: [
                { tool_call_id: w.id, content: '5C' },
                { tool_call_id: w.id, content: '5C' },
              ],
            },
            'body/tool_results/1/tool_call_id',
          ],
          [{ input: 'x', tool_results: [{ tool_call_id: w.id, content: '5C' }] }, 'body'],
          [{}, 'body'],
        ] as const
        for (const [body, field] of bad) {
          const b = await api.turn(id, body)
          t.equal(b.status, 400, JSON.stringify(body))
          t.equal(b.body.field, field)
        }

        fake.enqueue({ api: provider, text: 'It is 5C at noon.' })
        const done = await api.turn(id, {
          tool_results: [
            { tool_call_id: c.id, content: 'noon' },
            { tool_call_id: w.id, content: [{ type: 'text', text: '5C' }], is_error: false },
          ],
        })
        t.equal(done.status, 200)
        t.equal(done.body.status, 'completed')
        t.equal(done.body.turn, 1, 'the same turn continues')
        t.equal(done.body.output_text, 'Let me check.\n\nIt is 5C at noon.')
        t.same(
          done.body.messages.map((m: any) => [m.role, m.content.map((b: any) => b.type)]),
          [
            ['user', ['tool_result', 'tool_result']],
            ['assistant', ['text']],
          ],
        )
        t.same(
          done.body.messages[0].content.map((b: any) => b.tool_use_id),
          [w.id, c.id],
          'results in call order',
        )
        const nope = await api.turn(id, { tool_results: [{ tool_call_id: w.id, content: 'again' }] })
        t.equal(nope.status, 400)
        t.equal(nope.body.field, 'body/tool_results')
      })

      t.test('a tool the model invents gets an error result and the loop goes on', async (t) => {
        const id = await api.createSession({ model, tools: [WEATHER] })
        fake.enqueue(
          { api: provider, toolCalls: [{ name: 'rm_rf', input: { path: '/' } }] },
          { api: provider, text: 'Sorry, I cannot do that.' },
        )
        const s = await api.sse(`/v1/sessions/${id}/turns`, { method: 'POST', body: { input: 'clean up' } })
        const frames = await s.until((f) => f.event === 'turn_completed')
        const call = frames.find((f) => f.event === 'tool_call')!
        t.equal(call.data.data.executor, 'server')
        const result = frames.find((f) => f.event === 'tool_result')!
        t.equal(result.data.data.is_error, true)
        t.match(result.data.data.content, /Unknown tool: rm_rf/)
        t.equal(frames.at(-1)!.data.data.output_text, 'Sorry, I cannot do that.')
      })

      t.test('provider failures fail the turn, keep the session usable', async (t) => {
        const id = await api.createSession({ model })
        fake.enqueue(
          { api: provider, status: 500, errorMessage: 'upstream exploded' },
          { api: provider, status: 500, errorMessage: 'upstream exploded' },
          { api: provider, status: 500, errorMessage: 'upstream exploded' },
        )
        const r = await api.turn(id, { input: 'first' })
        t.equal(r.status, 502)
        t.equal(r.body.code, 'PROVIDER_ERROR')
        t.match(r.body.detail, /upstream exploded/)
        t.match(r.body.detail, /500/)
        t.equal(r.body.data.turn, 1)

        fake.enqueue({ api: provider, status: 429, headers: { 'retry-after': '0' } }, { api: provider, text: 'recovered' })
        const ok = await api.turn(id, { input: 'second' })
        t.equal(ok.status, 200, '429 is retried before the first byte')
        t.equal(ok.body.output_text, 'recovered')
        t.equal(ok.body.turn, 2)

        fake.enqueue({ api: provider, text: 'partial text then garbage', malformed: 'bad_json' })
        const bad = await api.turn(id, { input: 'third' })
        t.equal(bad.status, 502)
        t.equal(bad.body.code, 'PROVIDER_ERROR')
        t.match(bad.body.detail, /malformed/)

        fake.enqueue({ api: provider, hang: 'headers' })
        const slow = await api.turn(id, { input: 'fourth' })
        t.equal(slow.status, 504)
        t.equal(slow.body.code, 'PROVIDER_TIMEOUT')

        fake.enqueue({ api: provider, text: 'stalls', hang: 'body' })
        const stall = await api.turn(id, { input: 'fifth' })
        t.equal(stall.status, 504)
        t.equal(stall.body.code, 'PROVIDER_TIMEOUT')

        fake.enqueue({ api: provider, text: 'fine again' })
        const last = await api.turn(id, { input: 'sixth' })
        t.equal(last.status, 200)
        t.equal(last.body.turn, 6)
        const sent = ofProvider().at(-1)!
        t.notOk(sent.rejected, 'the history after failures is valid for the provider')
      })

      t.test('one turn at a time: a concurrent turn is SESSION_BUSY', async (t) => {
        const id = await api.createSession({ model })
        fake.enqueue({ api: provider, text: 'slow slow slow slow', chunkSize: 2, delayMs: 30 })
        const first = api.turn(id, { input: 'slow one' })
        await eventually(() => ofProvider().some((r) => JSON.stringify(r.body).includes('slow one')))
        const second = await api.turn(id, { input: 'too soon' })
        t.equal(second.status, 409)
        t.equal(second.body.code, 'SESSION_BUSY')
        t.equal((await first).status, 200)
      })

      t.test('interrupt cancels a running turn and leaves a valid history', async (t) => {
        const id = await api.createSession({ model, tools: [WEATHER] })
        const events = await api.sse(`/v1/sessions/${id}/events`)
        fake.enqueue({ api: provider, text: 'I will think for a long long time. '.repeat(10), chunkSize: 4, delayMs: 60 })
        const running = api.turn(id, { input: 'think' })
        await events.until((f) => f.event === 'text_delta')
        const i = await api.post(`/v1/sessions/${id}/interrupt`)
        t.same(i.body, { session_id: id, interrupted: true, turn: 1 })
        const r = await running
        t.equal(r.status, 409)
        t.equal(r.body.code, 'INTERRUPTED')
        const failed = await events.until((f) => f.event === 'turn_failed')
        t.equal(failed.at(-1)!.data.data.code, 'INTERRUPTED')

        const again = await api.post(`/v1/sessions/${id}/interrupt`)
        t.same(again.body, { session_id: id, interrupted: false, turn: null })

        // A paused turn can be interrupted too: its tool calls get synthetic results.
        fake.enqueue({ api: provider, toolCalls: [{ name: 'get_weather', input: { city: 'Rome' } }] })
        const paused = await api.turn(id, { input: 'weather?' })
        t.equal(paused.body.status, 'requires_action')
        const ip = await api.post(`/v1/sessions/${id}/interrupt`)
        t.same(ip.body, { session_id: id, interrupted: true, turn: 2 })
        const closing = await events.until((f) => f.event === 'turn_failed')
        const synthetic = closing.find((f) => f.event === 'tool_result')!
        t.equal(synthetic.data.data.tool_call_id, paused.body.tool_calls[0].id)
        t.equal(synthetic.data.data.is_error, true)
        t.equal(synthetic.data.data.synthetic, true)
        events.close()

        fake.enqueue({ api: provider, text: 'back to normal' })
        const next = await api.turn(id, { input: 'hello again' })
        t.equal(next.status, 200)
        t.equal(next.body.turn, 3)
        t.notOk(ofProvider().at(-1)!.rejected, 'the provider accepts the history')
      })

      t.test('max_total_tokens: BUDGET_EXCEEDED before and during a turn', async (t) => {
        const id = await api.createSession({ model, max_total_tokens: 150, tools: [WEATHER] })
        fake.enqueue({ api: provider, toolCalls: [{ name: 'invented_tool', input: {} }], usage: { input_tokens: 120, output_tokens: 40 } })
        const before = fake.requests.length
        const r = await api.turn(id, { input: 'spend it' })
        t.equal(r.status, 429)
        t.equal(r.body.code, 'BUDGET_EXCEEDED')
        t.equal(r.body.data.turn, 1, 'the turn ran and failed mid-way')
        t.equal(fake.requests.length, before + 1, 'no second LLM call once the budget is spent')
        const r2 = await api.turn(id, { input: 'more' })
        t.equal(r2.status, 429)
        t.equal(r2.body.code, 'BUDGET_EXCEEDED')
        t.notOk(r2.body.data?.turn, 'refused before starting')
        t.equal(fake.requests.length, before + 1)
      })

      t.test('Idempotency-Key: a retried turn does not run the model again', async (t) => {
        const id = await api.createSession({ model })
        fake.enqueue({ api: provider, text: 'only once' })
        const headers = { 'idempotency-key': `turn-${provider}-${mode.name}` }
        const a = await api.turn(id, { input: 'once' }, { headers })
        const count = fake.requests.length
        const b = await api.turn(id, { input: 'once' }, { headers })
        t.same(b.body, a.body)
        t.equal(fake.requests.length, count, 'no second provider call')
        const s = await api.sse(`/v1/sessions/${id}/turns`, { method: 'POST', body: { input: 'once' }, headers })
        const frames = await s.until((f) => f.event === 'turn_completed')
        t.same(
          frames.map((f) => f.data.seq),
          [2, 3, 4],
          'an SSE retry replays the stored events',
        )
        const c = await api.turn(id, { input: 'twice' }, { headers })
        t.equal(c.status, 422)
        t.equal(c.body.code, 'IDEMPOTENCY_CONFLICT')
      })

      t.test('the provider never saw an invalid history', async (t) => {
        t.same(
          ofProvider()
            .filter((r) => r.rejected)
            .map((r) => r.rejected),
          [],
        )
      })
    })
  }

t.test('a turn ends with stop_reason max_steps when the model keeps calling tools', async (t) => {
  const h = await startBurrow({ BURROW_MAX_TURN_STEPS: '2' }, { fake: true })
  t.teardown(() => h.close())
  const id = await h.api.createSession({ model: 'openai:gpt-4o-mini' })
  h.fake.enqueue({ toolCalls: [{ name: 'loop', input: {} }] }, { toolCalls: [{ name: 'loop', input: {} }] }, { text: 'never reached' })
  const r = await h.api.turn(id, { input: 'go' })
  t.equal(r.status, 200)
  t.equal(r.body.stop_reason, 'max_steps')
  t.equal(h.fake.pending(), 1, 'stopped after two LLM calls')
  await sleep(1)
})

t.test('offline provider: tool directive round trip', async (t) => {
  const h = await startBurrow()
  t.teardown(() => h.close())
  const id = await h.api.createSession({ tools: [WEATHER] })
  const r = await h.api.turn(id, { input: '/tool get_weather {"city":"Paris"}' })
  t.equal(r.body.status, 'requires_action')
  t.same(r.body.tool_calls[0].input, { city: 'Paris' })
  const r2 = await h.api.turn(id, { tool_results: [{ tool_call_id: r.body.tool_calls[0].id, content: 'sunny' }] })
  t.equal(r2.body.output_text, 'tool result: sunny')
})
