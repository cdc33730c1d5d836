// Idempotency-Key across two real server processes on one PostgreSQL database: the key is claimed
// in the database, so a retry on the other replica waits for the first attempt and gets its
// result, and the model runs once (counted at a fake provider); a retry still waiting after the
// bound (three lease durations) answers 409 SESSION_BUSY, and later gets the result.
import t from 'tap'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { Api, eventually } from '../helpers/harness.js'
import { twoReplicas } from './replicas.js'

const LEASE_MS = 1000

t.test('a retry on another replica returns the first result; the model runs once', async (t) => {
  const fake = await startFakeLlm({ openaiKey: 'k' })
  const { a, b } = await twoReplicas(t, { prefix: 'idem', leaseMs: LEASE_MS, llmUrl: fake.url })
  t.teardown(() => fake.close())
  const A = new Api(a.url)
  const B = new Api(b.url)
  const key = (k: string) => ({ headers: { 'idempotency-key': k } })

  // A session created twice with one key, once on each replica, is one session.
  const created = await A.post('/v1/sessions', { model: 'openai:gpt-4o-mini' }, key('create-1'))
  const again = await B.post('/v1/sessions', { model: 'openai:gpt-4o-mini' }, key('create-1'))
  t.equal(created.status, 201)
  t.same(again.body, created.body, 'the same session')
  const id = created.body.session_id

  // The retry arrives on B while A's attempt runs: it waits and gets A's result.
  let calls = fake.requests.length
  fake.enqueue({ text: 'answered once', chunkSize: 100, delayMs: 400 })
  const first = A.turn(id, { input: 'hello' }, key('turn-1'))
  await eventually(() => fake.requests.length > calls, 5000)
  const retried = await B.turn(id, { input: 'hello' }, key('turn-1'))
  const original = await first
  t.equal(original.status, 200)
  t.same(retried.body, original.body, 'the retry on B got the first result')
  t.equal(fake.requests.length, calls + 1, 'the model ran once')
  // Later retries, on either replica, too; another body under the key is a conflict.
  t.same((await B.turn(id, { input: 'hello' }, key('turn-1'))).body, original.body)
  t.same((await A.turn(id, { input: 'hello' }, key('turn-1'))).body, original.body)
  const other = await B.turn(id, { input: 'something else' }, key('turn-1'))
  t.equal(other.status, 422)
  t.equal(other.body.code, 'IDEMPOTENCY_CONFLICT')
  t.equal(fake.requests.length, calls + 1, 'still once')

  // A first attempt that outlasts the bound: the retry answers SESSION_BUSY, and later the result.
  calls = fake.requests.length
  fake.enqueue({ text: 'slow answer', chunkSize: 100, delayMs: 2500 })
  const slow = A.turn(id, { input: 'slow' }, key('turn-2'))
  await eventually(() => fake.requests.length > calls, 5000)
  const t0 = Date.now()
  const waiting = await B.turn(id, { input: 'slow' }, key('turn-2'))
  const waited = Date.now() - t0
  t.equal(waiting.status, 409)
  t.equal(waiting.body.code, 'SESSION_BUSY')
  t.match(waiting.body.detail, /Idempotency-Key is still running/)
  t.ok(waited >= 3 * LEASE_MS - 100, `the retry waited ${waited} ms first`)
  const done = await slow
  t.equal(done.status, 200)
  t.same((await B.turn(id, { input: 'slow' }, key('turn-2'))).body, done.body)
  t.equal(fake.requests.length, calls + 1, 'the model ran once')
  t.equal((await A.get(`/v1/sessions/${id}`)).body.turn_count, 2, 'two turns, however many retries')
})
