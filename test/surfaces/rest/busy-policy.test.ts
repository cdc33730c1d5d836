// The busy policy of a turn request (docs/api.md, "The busy policy"): reject, queue (in order,
// bounded, said on the turn's stream) and interrupt, against turns that really run (the real
// OpenAI client against the fake provider, slowed or stalled as scripted).
import t from 'tap'
import { eventually, startBurrow } from '../../helpers/harness.js'

const LOOKUP = { name: 'lookup', input_schema: { type: 'object', properties: { q: { type: 'string' } } } }

t.test('the busy policy', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb', BURROW_PROVIDER_IDLE_TIMEOUT_MS: '20000' }, { fake: true })
  t.teardown(() => h.close())
  const { api, fake } = h
  const session = () => api.createSession({ model: 'openai:gpt-4o-mini', tools: [LOOKUP] })
  const running = async (id: string) => eventually(async () => (await api.get(`/v1/sessions/${id}`)).body.running === true || undefined)

  t.test('reject (the default) answers SESSION_BUSY while a turn runs', async (t) => {
    const id = await session()
    fake.enqueue({ api: 'openai', text: 'slow answer', chunkSize: 4, delayMs: 150 })
    const first = api.turn(id, { input: 'first' })
    await running(id)
    for (const body of [{ input: 'second' }, { input: 'second', on_busy: 'reject' }]) {
      const r = await api.turn(id, body)
      t.equal(r.status, 409)
      t.equal(r.body.code, 'SESSION_BUSY')
    }
    t.equal((await first).status, 200)
  })

  t.test('queue: waits in order, says so on its stream, and starts when the turn before it ends', async (t) => {
    const id = await session()
    fake.enqueue(
      { api: 'openai', text: 'slow answer', chunkSize: 4, delayMs: 150 },
      ...['b', 'c', 'd'].map((x) => ({ api: 'openai' as const, text: `answer ${x}` })),
    )
    const first = await api.sse(`/v1/sessions/${id}/turns`, { method: 'POST', body: { input: 'first' } })
    await running(id)
    const streams = []
    for (const [i, x] of ['b', 'c', 'd'].entries()) {
      const s = await api.sse(`/v1/sessions/${id}/turns`, { method: 'POST', body: { input: x, on_busy: 'queue' } })
      t.equal(s.status, 200)
      const queued = await s.next()
      t.match(queued, { event: 'turn_queued', id: undefined, data: { type: 'turn_queued', session_id: id, data: { position: i + 1 } } })
      streams.push(s)
    }
    // The slot passes on as a turn's last event is emitted, before it is durable: each caller still gets
    // its own turn's events, all of them, and none of the next one's.
    const firstFrames = await first.until((f) => f.event === 'turn_completed', 10_000)
    first.close()
    t.equal(firstFrames.at(-1)!.data.turn, 1)
    t.same([...new Set(firstFrames.map((f) => f.data.turn))], [1], "the first caller's stream holds turn 1 only")
    for (const [i, s] of streams.entries()) {
      const frames = await s.until((f) => f.event === 'turn_completed', 10_000)
      const done = frames.at(-1)!
      t.equal(done.data.turn, i + 2, 'queued turns run in the order they came')
      t.equal(done.data.data.output_text, `answer ${'bcd'[i]}`)
      t.same([...new Set(frames.map((f) => f.data.turn))], [i + 2], `stream ${i + 2} holds its own turn's events only`)
      t.equal(frames[0]!.event, 'turn_started')
      s.close()
    }
    const log = (await api.get(`/v1/sessions/${id}/event-log?after=0&limit=1000`)).body.events
    const ends = log.filter((e: any) => e.type === 'turn_completed').map((e: any) => e.turn)
    t.same(ends, [1, 2, 3, 4])
  })

  t.test('queue is bounded: the 17th waiting request is SESSION_BUSY queue_full', async (t) => {
    const id = await session()
    fake.enqueue({ api: 'openai', hang: 'body' })
    const first = api.turn(id, { input: 'stalls' })
    await running(id)
    const waiting = Array.from({ length: 16 }, (_, i) => api.turn(id, { input: `q${i}`, on_busy: 'queue' }))
    const full = await eventually(async () => {
      const r = await api.turn(id, { input: 'one too many', on_busy: 'queue' })
      return r.status === 409 && r.body.data?.reason === 'queue_full' ? r : undefined
    })
    t.match(full!.body, { code: 'SESSION_BUSY', data: { reason: 'queue_full', queued: 16 } })
    const metrics = await api.get('/metrics')
    t.match(metrics.body, /^burrow_turns_queued 16$/m, 'the queue depth is on /metrics')
    const interrupted = await api.post(`/v1/sessions/${id}/interrupt`)
    t.equal(interrupted.body.interrupted, true)
    t.equal((await first).body.code, 'INTERRUPTED')
    const results = await Promise.all(waiting)
    t.same(
      results.map((r) => r.status),
      Array(16).fill(200),
    )
    t.same(
      results.map((r) => r.body.turn),
      Array.from({ length: 16 }, (_, i) => i + 2),
      'in order',
    )
  })

  t.test('interrupt: cancels the running turn, which ends INTERRUPTED, then runs', async (t) => {
    const id = await session()
    fake.enqueue({ api: 'openai', hang: 'body' }, { api: 'openai', text: 'the new answer' })
    const first = api.turn(id, { input: 'stalls' })
    await running(id)
    for (const on_busy of ['interrupt', 'queue']) {
      const invalid = await api.turn(id, { input: 'bad', on_busy, tool_choice: { type: 'tool', name: 'nope' } })
      t.match(
        invalid.body,
        { code: 'INVALID_REQUEST', field: 'body/tool_choice/name' },
        `${on_busy}: refused at once, before waiting or interrupting`,
      )
    }
    t.equal((await api.get(`/v1/sessions/${id}`)).body.running, true, 'the running turn goes on')
    const second = await api.turn(id, { input: 'instead', on_busy: 'interrupt' })
    t.equal(second.status, 200)
    t.match(second.body, { turn: 2, output_text: 'the new answer' })
    const cut = await first
    t.match(cut.body, { code: 'INTERRUPTED', detail: /newer turn/ })
    const log = (await api.get(`/v1/sessions/${id}/event-log?after=0&limit=1000`)).body.events
    t.match(
      log.filter((e: any) => e.type === 'turn_failed' || e.type === 'turn_completed'),
      [
        { turn: 1, type: 'turn_failed', data: { code: 'INTERRUPTED' } },
        { turn: 2, type: 'turn_completed' },
      ],
    )
  })

  t.test('a turn paused for tool results: queue refuses to wait for the client, interrupt closes it', async (t) => {
    const id = await session()
    fake.enqueue({ api: 'openai', toolCalls: [{ id: 'p1', name: 'lookup', input: { q: 'x' } }] })
    const paused = await api.turn(id, { input: 'look' })
    t.equal(paused.body.status, 'requires_action')
    const queued = await api.turn(id, { input: 'next', on_busy: 'queue' })
    t.equal(queued.status, 409)
    t.same(queued.body.data.pending_tool_call_ids, ['p1'])
    const invalid = await api.turn(id, { input: 'next', on_busy: 'interrupt', tool_choice: { type: 'tool', name: 'nope' } })
    t.equal(invalid.status, 400)
    t.same(
      (await api.get(`/v1/sessions/${id}`)).body.pending_tool_calls.map((c: any) => c.id),
      ['p1'],
      'an invalid request closes nothing',
    )
    fake.enqueue({ api: 'openai', text: 'fresh start' })
    const replaced = await api.turn(id, { input: 'next', on_busy: 'interrupt' })
    t.match(replaced.body, { status: 'completed', turn: 2, output_text: 'fresh start' })
    const view = (await api.get(`/v1/sessions/${id}`)).body
    t.same(view.pending_tool_calls, [])
    const sent = fake.requests.at(-1)!.body.messages
    t.ok(
      sent.some((m: any) => m.role === 'tool' && m.tool_call_id === 'p1'),
      'the closed call was answered, so the history sent is valid',
    )
  })
})
