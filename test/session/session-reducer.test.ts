import t from 'tap'
import type { EventEnvelope } from '../../src/core/events.js'
import type { LiveSessions } from '../../src/session/live-sessions.js'
import { rebuild } from '../../src/session/session-reducer.js'
import { startBurrow } from '../helpers/harness.js'

t.test('the log alone rebuilds the live session, tool stats included', async (t) => {
  const h = await startBurrow({}, { fake: true })
  t.teardown(() => h.close())
  const { api, fake } = h
  const tools = [
    { name: 'lookup', input_schema: { type: 'object' } },
    { name: 'save', input_schema: { type: 'object' } },
  ]
  const id = await api.createSession({ model: 'anthropic:claude-sonnet-4-5', tools })
  const stream = await api.sse(`/v1/sessions/${id}/events?after=0`)

  fake.enqueue({ text: 'hi' })
  await api.turn(id, { input: 'hello' })
  fake.enqueue({
    toolCalls: [
      { name: 'lookup', input: { q: 1 } },
      { name: 'save', input: {} },
      { name: 'ghost', input: {} },
    ],
  })
  const paused = await api.turn(id, { input: 'do things' })
  const [lookup, save] = paused.body.tool_calls
  fake.enqueue({ toolCalls: [{ name: 'lookup', input: { q: 2 } }] })
  const again = await api.turn(id, {
    tool_results: [
      { tool_call_id: lookup.id, content: 'found' },
      { tool_call_id: save.id, content: 'disk full', is_error: true },
    ],
  })
  await api.post(`/v1/sessions/${id}/interrupt`)
  fake.enqueue({ status: 400, errorMessage: 'bad request' })
  await api.turn(id, { input: 'fail please' })
  fake.enqueue({ text: 'done' })
  await api.turn(id, { input: 'finish' })
  t.equal(again.body.status, 'requires_action')

  const frames = await stream.until((f) => f.event === 'turn_completed' && f.data.turn === 4)
  stream.close()
  const events = frames.filter((f) => f.id).map((f) => f.data as EventEnvelope)
  t.same(
    events.map((e) => e.seq),
    events.map((_, i) => i + 1),
    'gapless from 1',
  )
  const rebuilt = rebuild(events)!
  // Reaching into the live table here is deliberate: the ephemeral build has no read route.
  const live = (await (h.burrow.service as unknown as { sessions: LiveSessions }).sessions.get('default', id)).record
  t.same(rebuilt, live, 'rebuild(log) equals the live record')
  t.same(rebuilt.tool_stats, {
    lookup: { calls: 2, failures: 1 }, // the second lookup was cut off by the interrupt: a synthetic error result
    save: { calls: 1, failures: 1 },
    ghost: { calls: 1, failures: 1 }, // unknown tool: answered with an error by the loop
  })
  t.equal(rebuilt.turn_count, 4)
  t.equal(rebuilt.open_turn, null)
  t.same(
    fake.requests.filter((r) => r.rejected),
    [],
    'every history the provider saw was valid',
  )
})
