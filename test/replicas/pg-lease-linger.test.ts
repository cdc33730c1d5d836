// A session's lease kept after its work (BURROW_LEASE_LINGER_MS), on two real server processes on
// one PostgreSQL database: the next turn on the same replica holds it again without taking it anew
// (same token), it is released when the linger ends, another replica asks for it and gets it at
// once, a replica that runs a turn keeps it (SESSION_BUSY), a graceful stop releases it, and a
// killed replica's kept lease just runs to its expiry.
import t from 'tap'
import type pg from 'pg'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { Api, eventually } from '../helpers/harness.js'
import { stopServer } from '../helpers/child-server.js'
import { assertGapless, storedLog, twoReplicas } from './replicas.js'

const fake = await startFakeLlm({ openaiKey: 'k' })
t.teardown(() => fake.close())

async function leaseOf(db: pg.Client, id: string): Promise<{ owner: string; token: number; ended: boolean }> {
  const r = await db.query('SELECT owner, token, expires_at <= now() AS ended FROM leases WHERE session_id = $1', [id])
  const row = r.rows[0]
  return { owner: row.owner, token: Number(row.token), ended: row.ended }
}

t.test('the next turn on the same replica holds the kept lease again; the linger ends in a release', async (t) => {
  const { a, db } = await twoReplicas(t, { prefix: 'linger', leaseMs: 5000, llmUrl: fake.url, env: { BURROW_LEASE_LINGER_MS: '1500' } })
  const A = new Api(a.url)
  const id = await A.createSession({ model: 'openai:gpt-4o-mini' })
  fake.enqueue({ text: 'one' })
  t.match((await A.turn(id, { input: 'one' })).body, { turn: 1, status: 'completed' })
  const first = await leaseOf(db, id)
  t.match(first, { owner: 'replica-a', ended: false }, 'kept after the turn')
  for (let n = 2; n <= 4; n++) {
    fake.enqueue({ text: `reply ${n}` })
    t.match((await A.turn(id, { input: `turn ${n}` })).body, { turn: n, status: 'completed' })
  }
  t.equal((await leaseOf(db, id)).token, first.token, 'the turns after the first took no lease of their own: one token')
  await eventually(async () => (await leaseOf(db, id)).ended, 5000)
  t.match(await leaseOf(db, id), { owner: 'replica-a', token: first.token, ended: true }, 'released once the linger ended')
  fake.enqueue({ text: 'five' })
  t.match((await A.turn(id, { input: 'five' })).body, { turn: 5, status: 'completed' })
  t.equal((await leaseOf(db, id)).token, first.token + 1, 'taken anew after its release')
  assertGapless(t, await storedLog(db, id))
})

t.test('another replica asks for a kept lease and gets it at once; not while a turn holds it', async (t) => {
  // A linger and a lease far longer than the test: only the request can hand the session over.
  const { a, b, db } = await twoReplicas(t, {
    prefix: 'linger',
    leaseMs: 60_000,
    llmUrl: fake.url,
    env: { BURROW_LEASE_LINGER_MS: '60000' },
  })
  const A = new Api(a.url)
  const B = new Api(b.url)
  const id = await A.createSession({ model: 'openai:gpt-4o-mini' })
  fake.enqueue({ text: 'on A' })
  t.match((await A.turn(id, { input: 'one' })).body, { turn: 1, status: 'completed' })
  const kept = await leaseOf(db, id)
  t.match(kept, { owner: 'replica-a', ended: false })
  fake.enqueue({ text: 'on B' })
  const t0 = performance.now()
  const onB = await B.turn(id, { input: 'two' })
  t.comment(`B's turn answered in ${Math.round(performance.now() - t0)} ms (A gave the lease up when asked)`)
  t.match(onB.body, { turn: 2, status: 'completed' }, 'B ran the next turn without waiting for the lease to expire')
  t.match(await leaseOf(db, id), { owner: 'replica-b', token: kept.token + 1, ended: false }, 'B holds it now, and keeps it')
  const sent = fake.requests.at(-1)!.body.messages.map((m: any) => m.content)
  t.same(sent, ['one', 'on A', 'two'], 'B sent the model the history with A’s turn in it')

  // A turn running on B: A asks, B refuses, A answers SESSION_BUSY; after it, A gets the session.
  fake.enqueue({ text: 'slow, on B', delayMs: 1500 })
  const slow = B.turn(id, { input: 'three' })
  await eventually(() => fake.requests.at(-1)!.body.messages.length === 5, 5000)
  const busy = await A.turn(id, { input: 'meanwhile' })
  t.equal(busy.status, 409)
  t.match(busy.body, { code: 'SESSION_BUSY', data: { reason: 'leased_elsewhere' } })
  t.match((await slow).body, { turn: 3, status: 'completed' })
  fake.enqueue({ text: 'four, on A' })
  t.match((await A.turn(id, { input: 'four' })).body, { turn: 4, status: 'completed' })
  t.match(await leaseOf(db, id), { owner: 'replica-a' })
  const log = await storedLog(db, id)
  assertGapless(t, log)
  t.same(
    log.filter((e) => e.type === 'turn_completed').map((e) => e.turn),
    [1, 2, 3, 4],
  )
})

t.test('a killed replica’s kept lease runs to its expiry; a graceful stop releases the kept leases', async (t) => {
  const LEASE_MS = 2000
  const { a, b, db } = await twoReplicas(t, {
    prefix: 'linger',
    leaseMs: LEASE_MS,
    llmUrl: fake.url,
    env: { BURROW_LEASE_LINGER_MS: '60000' },
  })
  const A = new Api(a.url)
  const B = new Api(b.url)
  const killed = await A.createSession({ model: 'openai:gpt-4o-mini' })
  fake.enqueue({ text: 'before the kill' })
  t.match((await A.turn(killed, { input: 'one' })).body, { turn: 1, status: 'completed' })
  a.child.kill('SIGKILL')
  const t0 = Date.now()
  const busy = await B.turn(killed, { input: 'two' })
  t.match(busy, { status: 409, body: { code: 'SESSION_BUSY' } }, 'nobody answers for the dead replica: SESSION_BUSY while its lease lasts')
  fake.enqueue({ text: 'after the expiry' })
  const next = await eventually(async () => {
    const r = await B.turn(killed, { input: 'two' })
    return r.status === 200 ? r : undefined
  }, LEASE_MS + 4000)
  t.match(next!.body, { turn: 2, status: 'completed' }, 'then the next turn runs')
  t.ok(Date.now() - t0 <= LEASE_MS + 4000, `within the lease and a sweep after the kill (${Date.now() - t0} ms)`)

  const stopped = await B.createSession({ model: 'openai:gpt-4o-mini' })
  fake.enqueue({ text: 'before the stop' })
  t.match((await B.turn(stopped, { input: 'one' })).body, { turn: 1, status: 'completed' })
  t.match(await leaseOf(db, stopped), { owner: 'replica-b', ended: false })
  await stopServer(b)
  t.match(
    await leaseOf(db, stopped),
    { owner: 'replica-b', ended: true },
    'released by the stop, long before the linger or the lease would end',
  )
})
