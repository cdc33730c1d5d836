// Two real server processes on one PostgreSQL database, each caching a session the other writes:
// a read on a replica that cached the session shows the turns acknowledged on the other right
// after their 200 (a view, an event page, notes, a deletion), a read during this replica's own turn
// does not reload it mid-turn, and a replica's SSE subscribers of the session outlive the reload its
// next turn makes (revalidation), receiving every event of every turn once, in order.
import t from 'tap'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { Api, eventually } from '../helpers/harness.js'
import type { SseFrame, SseStream } from '../helpers/sse-client.js'
import { storedLog, twoReplicas } from './replicas.js'

const fake = await startFakeLlm({ openaiKey: 'k' })
t.teardown(() => fake.close())

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)
const stored = (frames: SseFrame[]) => frames.filter((f) => f.id !== undefined && f.event !== 'text_delta')

t.test('a read on a replica that cached the session shows what another replica acknowledged', async (t) => {
  const { a, b } = await twoReplicas(t, { prefix: 'reads', leaseMs: 3000, llmUrl: fake.url })
  const A = new Api(a.url)
  const B = new Api(b.url)
  const id = await A.createSession({ model: 'openai:gpt-4o-mini' })
  // Cached on A: read there first (the view, an event page, the notes).
  t.match((await A.get(`/v1/sessions/${id}`)).body, { turn_count: 0, last_seq: 1 })
  t.equal((await A.get(`/v1/sessions/${id}/event-log?after=0&limit=100`)).body.last_seq, 1)
  t.same((await A.get(`/v1/sessions/${id}/notes`)).body, { notes: [] })

  fake.enqueue({ text: 'first, on B' })
  const one = await B.turn(id, { input: 'one' })
  t.equal(one.status, 200)
  const viewOne = await A.get(`/v1/sessions/${id}`)
  t.match(viewOne.body, { turn_count: 1, last_seq: one.body.last_seq }, 'A shows B’s turn right after B’s 200')
  t.match(viewOne.body.messages.at(-1), { role: 'assistant', content: [{ type: 'text', text: 'first, on B' }] })

  fake.enqueue({ text: 'second, on B' })
  const two = await B.turn(id, { input: 'two' })
  const page = (await A.get(`/v1/sessions/${id}/event-log?after=${one.body.last_seq}&limit=100`)).body
  t.equal(page.last_seq, two.body.last_seq, 'an event page on A has B’s last seq')
  t.same(
    page.events.map((e: any) => e.seq),
    range(one.body.last_seq + 1, two.body.last_seq),
    'and B’s events',
  )
  t.equal(page.truncated, false)
  t.match((await A.get(`/v1/sessions/${id}`)).body, { turn_count: 2, last_seq: two.body.last_seq })

  t.equal((await B.call('PUT', `/v1/sessions/${id}/notes/colour`, { body: { value: 'green' } })).status, 200)
  t.match((await A.get(`/v1/sessions/${id}/notes`)).body.notes, [{ key: 'colour', value: 'green' }], 'a note put on B reads on A')

  // A read during A's own turn: the live record is ahead of the store, nothing is reloaded under the turn.
  fake.enqueue({ text: 'slow, on A', delayMs: 1500 })
  const asked = fake.requests.length
  const slow = A.turn(id, { input: 'three' })
  await eventually(() => fake.requests.length > asked, 5000)
  const during = (await A.get(`/v1/sessions/${id}`)).body
  t.match(during, { running: true, turn_count: 3 }, 'the read on A sees its running turn')
  t.ok(during.last_seq > two.body.last_seq)
  const three = await slow
  t.match(three.body, { turn: 3, status: 'completed', output_text: 'slow, on A' })
  t.match((await B.get(`/v1/sessions/${id}`)).body, { turn_count: 3, last_seq: three.body.last_seq, running: false })

  // Deleted on B: A answers as for an unknown id at once.
  t.equal((await B.delete(`/v1/sessions/${id}`)).status, 204)
  const gone = await A.get(`/v1/sessions/${id}`)
  t.equal(gone.status, 404)
  t.equal(gone.body.code, 'SESSION_NOT_FOUND')
})

t.test('SSE subscribers on A outlive the reload A’s turn makes after turns on B: every event once, in order', async (t) => {
  const { a, b, db } = await twoReplicas(t, { prefix: 'readsse', leaseMs: 3000, llmUrl: fake.url })
  const A = new Api(a.url)
  const B = new Api(b.url)
  const id = await A.createSession({ model: 'openai:gpt-4o-mini' })
  t.equal((await A.get(`/v1/sessions/${id}`)).status, 200)
  // One stream without Last-Event-ID (live from now: seq 1 is stored already), one resuming after seq 1.
  const live = await A.sse(`/v1/sessions/${id}/events`)
  const resumed = await A.sse(`/v1/sessions/${id}/events`, { headers: { 'last-event-id': '1' } })
  t.equal(live.status, 200)
  t.equal(resumed.status, 200)
  const turnOn = async (api: Api, text: string) => {
    fake.enqueue({ text })
    const r = await api.turn(id, { input: `input for ${text}` })
    t.equal(r.status, 200, text)
    return r.body
  }
  await turnOn(B, 'one on B')
  await turnOn(B, 'two on B')
  // A's cached record is behind the store: this turn takes the lease and reloads the session first.
  const onA = await turnOn(A, 'three on A')
  t.equal(onA.turn, 3, 'A numbered its turn after B’s')
  const last = (await turnOn(B, 'four on B')).last_seq

  const log = await storedLog(db, id)
  t.same(
    log.map((e) => e.seq),
    range(1, last),
  )
  const check = async (name: string, stream: SseStream) => {
    const frames = await stream.until((f) => f.event === 'stream_closed' || (Number(f.id) === last && f.event === 'turn_completed'), 10_000)
    t.notOk(
      frames.some((f) => f.event === 'stream_closed'),
      `${name}: the stream stayed open`,
    )
    t.same(
      stored(frames).map((f) => Number(f.id)),
      range(2, last),
      `${name}: every stored event of the four turns, once, in order`,
    )
    t.same(
      stored(frames).map((f) => f.event),
      log.slice(1).map((e) => e.type),
      `${name}: the frames are the log`,
    )
    // Still open after it: the next event arrives too, and nothing came twice meanwhile.
    const more = await turnOn(B, `five on B for ${name}`)
    const next = await stream.until(
      (f) => f.event === 'stream_closed' || (Number(f.id) === more.last_seq && f.event === 'turn_completed'),
      10_000,
    )
    t.same(
      stored(next).map((f) => Number(f.id)),
      range(last + 1, more.last_seq),
      `${name}: still live`,
    )
    return more.last_seq
  }
  await check('without Last-Event-ID', live)
  await check('with Last-Event-ID', resumed)
  live.close()
  resumed.close()
})

t.test('a note change on a replica that cached the session before another archived it is refused', async (t) => {
  const { a, b } = await twoReplicas(t, { prefix: 'readsarch', leaseMs: 3000, llmUrl: fake.url })
  const A = new Api(a.url)
  const B = new Api(b.url)
  const id = await A.createSession({ model: 'openai:gpt-4o-mini' })
  t.equal((await A.call('PUT', `/v1/sessions/${id}/notes/k`, { body: { value: 'before' } })).status, 200, 'cached on A')
  t.equal((await B.call('POST', `/v1/sessions/${id}/archive`)).status, 200, 'archived on B')
  const put = await A.call('PUT', `/v1/sessions/${id}/notes/k`, { body: { value: 'after' } })
  t.equal(put.status, 409)
  t.equal(put.body.code, 'SESSION_ARCHIVED')
  const del = await A.call('DELETE', `/v1/sessions/${id}/notes/k`)
  t.equal(del.status, 409)
  t.equal(del.body.code, 'SESSION_ARCHIVED')
  t.match((await B.get(`/v1/sessions/${id}/notes`)).body.notes, [{ key: 'k', value: 'before' }], 'the note is unchanged')
})

t.test('a session deleted on one replica ends its streams on the other at once, with no read there', async (t) => {
  const { a, b } = await twoReplicas(t, { prefix: 'readsdel', leaseMs: 3000, llmUrl: fake.url })
  const A = new Api(a.url)
  const B = new Api(b.url)
  const id = await A.createSession({ model: 'openai:gpt-4o-mini' })
  const live = await A.sse(`/v1/sessions/${id}/events`)
  t.teardown(() => live.close())
  t.equal((await B.call('DELETE', `/v1/sessions/${id}`)).status, 204, 'deleted on B')
  const frames = await live.until((f) => f.event === 'stream_closed', 5_000)
  t.match(frames.at(-1)!.data, { type: 'stream_closed', data: { reason: 'session_deleted' } }, "A's stream of the session ends, told why")
  t.equal((await A.get(`/v1/sessions/${id}`)).status, 404, 'and A no longer has it')
})
