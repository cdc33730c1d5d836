// Two real server processes on one PostgreSQL database: one turn at a time per session across
// them (SESSION_BUSY from the other replica), a replica's cached session revalidated against the
// log before a turn, and fencing — a replica frozen (SIGSTOP) past its lease loses the session to
// the other, and what it tries to commit when it wakes is refused, the log staying consistent.
import t from 'tap'
import { checkHistory } from '../../src/core/messages.js'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { Api, eventually, sleep } from '../helpers/harness.js'
import { storedLog, twoReplicas } from './replicas.js'

const fake = await startFakeLlm({ openaiKey: 'k' })
t.teardown(() => fake.close())

t.test('one turn at a time per session across replicas; a turn sees what another replica committed', async (t) => {
  const { a, b, db } = await twoReplicas(t, { prefix: 'leases', leaseMs: 3000, llmUrl: fake.url })
  const A = new Api(a.url)
  const B = new Api(b.url)
  const id = await A.createSession({ model: 'openai:gpt-4o-mini' })
  fake.enqueue({ text: 'first, on B' })
  t.match((await B.turn(id, { input: 'one' })).body, { turn: 1, status: 'completed' })
  fake.enqueue({ text: 'second, on A' })
  const second = await A.turn(id, { input: 'two' })
  t.match(second.body, { turn: 2, status: 'completed' }, 'A numbers its turn after B’s')
  const sent = fake.requests.at(-1)!.body.messages.map((m: any) => m.content)
  t.same(sent, ['one', 'first, on B', 'two'], 'A sent the model the history with B’s turn in it')

  // A slow turn on A holds the session: B answers SESSION_BUSY, and after it, B runs the next turn.
  fake.enqueue({ text: 'slow, on A', delayMs: 1500 })
  const slow = A.turn(id, { input: 'three' })
  await eventually(() => fake.requests.at(-1)!.body.messages.length === 5, 5000)
  const busy = await B.turn(id, { input: 'meanwhile' })
  t.equal(busy.status, 409)
  t.equal(busy.body.code, 'SESSION_BUSY')
  t.equal((await B.post(`/v1/sessions/${id}/archive`)).body.code, 'SESSION_BUSY', 'archive waits for the turn too')
  t.match((await slow).body, { turn: 3, status: 'completed' })
  fake.enqueue({ text: 'fourth, on B' })
  t.match((await B.turn(id, { input: 'four' })).body, { turn: 4, status: 'completed' })
  const log = await storedLog(db, id)
  t.same(
    log.map((e) => e.seq),
    log.map((_, i) => i + 1),
    'gapless',
  )
  t.same(
    log.filter((e) => e.type === 'turn_completed').map((e) => e.turn),
    [1, 2, 3, 4],
  )
  const lease = (await db.query('SELECT owner, token, expires_at <= now() AS ended FROM leases WHERE session_id = $1', [id])).rows[0]
  t.match(lease, { owner: 'replica-b', ended: true }, 'released when the work ended')
  t.ok(Number(lease.token) >= 4, 'a token per lease taken')
})

t.test('a replica frozen past its lease loses the session: its commits are refused, the log stays consistent', async (t) => {
  const { a, b, db } = await twoReplicas(t, { prefix: 'leases', leaseMs: 1000, llmUrl: fake.url })
  const A = new Api(a.url)
  const B = new Api(b.url)
  const id = await A.createSession({ model: 'openai:gpt-4o-mini' })
  fake.enqueue({ text: 'acknowledged on A' })
  t.match((await A.turn(id, { input: 'one' })).body, { turn: 1, status: 'completed' })
  const before = fake.requests.length
  fake.enqueue({ text: 'too late', delayMs: 2500 })
  const stale = A.turn(id, { input: 'two' })
  await eventually(() => fake.requests.length > before, 5000)
  a.child.kill('SIGSTOP')
  await sleep(1500) // past A's lease: B may take the session now
  fake.enqueue({ text: 'on B' })
  const onB = await eventually(async () => {
    const r = await B.turn(id, { input: 'three' })
    return r.status === 200 ? r : undefined
  }, 5000)
  t.match(onB!.body, { turn: 3, status: 'completed' }, 'B closed the turn of the stopped replica and ran its own')
  a.child.kill('SIGCONT')
  const t0 = Date.now()
  const refused = await stale
  t.comment(`A answered ${Date.now() - t0} ms after it woke`)
  t.not(refused.status, 200, 'A could not complete a turn it no longer held')
  t.ok(['STORE_UNAVAILABLE', 'INTERNAL'].includes(refused.body.code), `A answered ${refused.body.code}`)
  await eventually(() => a.lines.some((l) => /lost the lease|could not be stored/.test(l.msg ?? '')), 5000)

  const log = await storedLog(db, id)
  t.same(
    log.map((e) => e.seq),
    log.map((_, i) => i + 1),
    'gapless',
  )
  t.same(
    log.filter((e) => e.turn === 2).map((e) => [e.type, e.data.reason]),
    [
      ['turn_started', undefined],
      ['turn_failed', 'process_restarted'],
    ],
    'turn 2: its start, then B’s crash-recovery close — nothing of what A wrote after its lease',
  )
  t.notOk(
    log.some((e) => JSON.stringify(e.data).includes('too late')),
    'the answer A got after losing its lease is nowhere in the log',
  )
  const view = (await B.get(`/v1/sessions/${id}`)).body
  t.equal(checkHistory(view.messages), null, 'the history is valid for a provider')

  // A takes the next turn with B's in its history.
  fake.enqueue({ text: 'A again' })
  const next = await A.turn(id, { input: 'four' })
  t.match(next.body, { turn: 4, status: 'completed' })
  const sentByA = fake.requests.at(-1)!.body.messages.map((m: any) => m.content)
  t.match(sentByA.slice(0, 2), ['one', 'acknowledged on A'])
  t.same(sentByA.slice(-2), ['on B', 'four'], 'with B’s turn in it')
  t.match(sentByA.at(-3), /three$/)
  t.notOk(sentByA.includes('too late'))
  t.equal(a.child.exitCode, null, 'A is still running')
})
