// Two real server processes on one PostgreSQL database: one turn at a time per session across
// them (SESSION_BUSY from the other replica), a replica's cached session revalidated against the
// log before a turn, and fencing — a replica frozen (SIGSTOP) past its lease loses the session to
// the other, and what it tries to commit when it wakes is refused, the log staying consistent; the
// cut-off turn's client gets STORE_UNAVAILABLE (reason lease_lost), as JSON or as its stream's last frame.
import t from 'tap'
import { BurrowClient, BurrowError, type EventEnvelope } from '../../src/client/index.js'
import { checkHistory } from '../../src/core/messages.js'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { Api, eventually, sleep } from '../helpers/harness.js'
import { assertGapless, storedLog, twoReplicas } from './replicas.js'

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
  assertGapless(t, log)
  t.same(
    log.filter((e) => e.type === 'turn_completed').map((e) => e.turn),
    [1, 2, 3, 4],
  )
  const lease = (await db.query('SELECT owner, token, expires_at <= now() AS ended FROM leases WHERE session_id = $1', [id])).rows[0]
  t.match(lease, { owner: 'replica-b', ended: false }, 'kept after the work, for the session’s next (BURROW_LEASE_LINGER_MS)')
  t.equal(Number(lease.token), 3, 'a token each time the session changed replicas (B, A, B): the other one asked for the kept lease')
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
  t.equal(refused.status, 503, 'A could not complete a turn it no longer held: 503, not 500')
  t.match(refused.body, { code: 'STORE_UNAVAILABLE', data: { reason: 'lease_lost' } }, 'the code says the store refused it, the reason why')
  t.match(refused.body.detail, `Session ${id} was taken over by another replica`)
  await eventually(() => a.lines.some((l) => /lost the lease/.test(l.msg ?? '')), 5000)
  t.notOk(
    a.lines.some((l) => l.level >= 50 && /could not be stored|turn failed/.test(l.msg ?? '')),
    'not logged as an internal error',
  )
  t.equal((await A.get('/readyz')).status, 200, 'a fencing refusal is no outage: A stays ready')

  const log = await storedLog(db, id)
  assertGapless(t, log)
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

t.test('a streamed turn cut off by a takeover ends its stream with the problem: STORE_UNAVAILABLE, lease_lost', async (t) => {
  const { a, b, db } = await twoReplicas(t, { prefix: 'leases', leaseMs: 1000, llmUrl: fake.url })
  const A = new Api(a.url)
  const B = new Api(b.url)
  const id = await A.createSession({ model: 'openai:gpt-4o-mini' })
  const viaSdk = await A.createSession({ model: 'openai:gpt-4o-mini' })
  const before = fake.requests.length
  // The model never finishes: only losing the lease ends A's turns (its renewal finds it gone).
  fake.enqueue({ text: 'never finished', hang: 'body' })
  fake.enqueue({ text: 'never finished either', hang: 'body' })
  const stream = await A.sse(`/v1/sessions/${id}/turns`, { method: 'POST', body: { input: 'one' } })
  t.equal(stream.status, 200)
  const started = (await stream.until((f) => f.event === 'turn_started', 10_000)).at(-1)!
  // The same through the SDK's streamed turn, on a second session.
  const seenBySdk: EventEnvelope[] = []
  const sdkTurn = new BurrowClient({ baseUrl: a.url }).startTurn(viaSdk, { input: 'one' }, { onEvent: (e) => seenBySdk.push(e) }).then(
    () => undefined,
    (err: unknown) => err,
  )
  await eventually(() => fake.requests.length >= before + 2, 5000)
  a.child.kill('SIGSTOP')
  await sleep(1500) // past A's lease
  const takeOver = async (session: string, text: string) => {
    fake.enqueue({ text })
    return eventually(async () => {
      const r = await B.turn(session, { input: 'two' })
      return r.status === 200 ? r : undefined
    }, 5000)
  }
  const onB = await takeOver(id, 'on B')
  t.match(onB!.body, { turn: 2, status: 'completed' }, 'B closed the cut-off turn and ran its own')
  t.match((await takeOver(viaSdk, 'on B, the other session'))!.body, { turn: 2, status: 'completed' })
  a.child.kill('SIGCONT')
  const rest = await stream.until((f) => f.event === 'stream_closed', 10_000)
  t.notOk(
    rest.some((f) => ['turn_completed', 'turn_failed', 'turn_requires_action'].includes(f.event)),
    'no end of the turn that the log does not hold',
  )
  const last = rest.at(-1)!
  t.equal(last.id, undefined, 'a control frame: no seq')
  t.match(last.data, {
    type: 'stream_closed',
    session_id: id,
    data: { reason: 'error', problem: { status: 503, code: 'STORE_UNAVAILABLE', data: { reason: 'lease_lost' } } },
  })
  t.match(last.data.data.problem.detail, `Session ${id} was taken over by another replica`)
  t.equal(await stream.next(5000), null, 'and the stream ends there')
  const sdkErr = await sdkTurn
  t.ok(sdkErr instanceof BurrowError, 'the SDK rejects')
  t.match(sdkErr, { code: 'STORE_UNAVAILABLE', data: { reason: 'lease_lost' }, message: `Session ${viaSdk} was taken over` })
  t.same(
    seenBySdk.filter((e) => e.type !== 'text_delta').map((e) => e.type),
    ['turn_started'],
    'its onEvent saw the stored events only, not the control frame',
  )
  t.equal((await A.get('/readyz')).status, 200, 'A stays ready')

  const log = await storedLog(db, id)
  assertGapless(t, log)
  t.same(
    log.filter((e) => e.turn === 1).map((e) => [e.seq, e.type, e.data.reason]),
    [
      [Number(started.id), 'turn_started', undefined],
      [Number(started.id) + 1, 'turn_failed', 'process_restarted'],
    ],
    'turn 1: the start A streamed, then B’s close',
  )
  t.same(
    log.filter((e) => e.turn === 2).map((e) => e.type),
    ['turn_started', 'assistant_message', 'turn_completed'],
  )
  t.equal(checkHistory((await B.get(`/v1/sessions/${id}`)).body.messages), null, 'the history is valid for a provider')
  // A takes the next turn with B's in its history.
  fake.enqueue({ text: 'A again' })
  t.match((await A.turn(id, { input: 'three' })).body, { turn: 3, status: 'completed' })
  const sentByA = fake.requests.at(-1)!.body.messages.map((m: any) => m.content)
  t.same(sentByA.slice(-2), ['on B', 'three'], 'with B’s turn in it')
  t.match(sentByA.at(-3), /two$/)
  t.notOk(sentByA.includes('never finished'))
})
