// What the PostgreSQL repository must hold beyond the conformance suites: the database itself
// refuses a gap or a stale fencing token (another process may have written), a lease has one
// holder and fences out one whose lease expired, text round-trips exactly, and delete leaves no
// row of the session in any table. A database of its own per test.
import t, { type Test } from 'tap'
import pg from 'pg'
import { BurrowError } from '../../src/core/errors.js'
import { PgSessionRepository } from '../../src/store/pg-session-repository.js'
import { SessionLog, config, sessionId } from '../contract/fixtures.js'
import { eventually } from '../helpers/harness.js'
import { PG_ADMIN_URL, tempDatabase } from '../helpers/pg.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'
import type { LeaseHeld, SessionLease } from '../../src/core/stores.js'

/** A lease acquisition's lease, or undefined when it was not taken. */
function taken(x: SessionLease | LeaseHeld | undefined): SessionLease | undefined {
  return x && !('held' in x) ? x : undefined
}

const open = (url: string) => PgSessionRepository.open({ url, poolSize: 2, replicaId: 'test', idempotencyTtlMs: 3_600_000 })

async function setup(t: Parameters<typeof tempDatabase>[0]) {
  const db = await tempDatabase(t, 'pgrepo')
  const direct = new pg.Pool({ connectionString: db.url, max: 1 })
  direct.on('error', () => undefined)
  t!.teardown(() => direct.end())
  return { db, direct }
}

/** Two repositories on one database as two replicas hold them (leases of 1 s), closed at `t`'s teardown. */
async function twoProcesses(t: Parameters<typeof tempDatabase>[0], url: string) {
  const opts = { url, poolSize: 2, idempotencyTtlMs: 3_600_000, leaseMs: 1000 }
  const a = await PgSessionRepository.open({ ...opts, replicaId: 'replica-a' })
  const b = await PgSessionRepository.open({ ...opts, replicaId: 'replica-b' })
  t!.teardown(async () => {
    await a.close()
    await b.close()
  })
  return { a, b }
}

t.test('a second process that does not know the log cannot write a gap or a duplicate seq', async (t) => {
  const { db } = await setup(t)
  const a = await open(db.url)
  const b = await open(db.url)
  t.teardown(async () => {
    await a.close()
    await b.close()
  })
  const log = new SessionLog(sessionId(1))
  for (const c of [log.create(), log.turn('one')]) await a.commit(c.events, c.record)
  const stored = await a.events.readAfter(log.id, 0)
  // b builds on a stale view: the session as it was after its creation.
  const stale = new SessionLog(log.id)
  stale.add(0, { type: stored[0]!.type, data: stored[0]!.data })
  const dup = stale.turn('written twice')
  await t.rejects(b.commit(dup.events, dup.record), /out of order/, 'seq 2 is taken')
  const gap = new SessionLog(log.id)
  for (const e of stored) gap.add(e.turn, { type: e.type, data: e.data })
  gap.turn('never committed')
  const skipped = gap.turn('after a hole')
  await t.rejects(b.commit(skipped.events, skipped.record), /out of order/, 'a batch after a hole')
  t.same(await b.events.readAfter(log.id, 0), stored, 'the log is as a left it')
  t.same(await b.sessions.get(log.id), log.record, 'and so is the snapshot')
  const again = new SessionLog(log.id).create()
  await t.rejects(b.commit(again.events, again.record), /out of order/, 'a second creation of the same session')
  // b follows the log once it has read it.
  const follow = new SessionLog(log.id)
  for (const e of stored) follow.add(e.turn, { type: e.type, data: e.data })
  const ok = follow.turn('two')
  await b.commit(ok.events, ok.record)
  t.equal(await a.events.lastSeq(log.id), stored.length + ok.events.length)
})

/** A commit refused because a newer fencing token wrote: STORE_UNAVAILABLE that says the session was taken over. */
async function fencedOut(t: Test, p: Promise<void>, id: string, what: string): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  )
  t.ok(err instanceof BurrowError, `${what}: a BurrowError`)
  t.match(
    err,
    { code: 'STORE_UNAVAILABLE', data: { reason: 'lease_lost' }, message: `Session ${id} was taken over by another replica` },
    `${what}: STORE_UNAVAILABLE (lease_lost), saying so`,
  )
  t.equal((err as BurrowError).status, 503)
}

t.test('a commit carrying an older fencing token than the last one stored is refused: STORE_UNAVAILABLE, taken over', async (t) => {
  const { db, direct } = await setup(t)
  let token = 5
  const repo = await open(db.url)
  t.teardown(() => repo.close())
  const log = new SessionLog(sessionId(2))
  // As a lease taken by this replica would leave it: a commit under a token needs its lease row.
  const lease = (n: number) =>
    direct.query(
      `INSERT INTO leases VALUES ($1, $2, 'test', $3, now() + interval '1 hour')
       ON CONFLICT (tenant, session_id) DO UPDATE SET token = excluded.token`,
      [log.record?.config.tenant ?? config().tenant, log.id, n],
    )
  await lease(token)
  for (const c of [log.create(), log.turn('with token 5')]) await repo.commit(c.events, c.record, token)
  const row = async () => (await direct.query('SELECT fence, last_seq, head::text FROM sessions')).rows[0]
  const before = await row()
  t.match(before, { fence: '5', last_seq: String(log.record!.last_seq) })
  const stored = await repo.events.readAfter(log.id, 0)

  // Under the current token, a batch that does not follow the log is a conflict, not a takeover.
  const stale = new SessionLog(log.id)
  stale.add(0, { type: stored[0]!.type, data: stored[0]!.data })
  const dup = stale.turn('a stale view, same token')
  const conflict = await repo.commit(dup.events, dup.record, token).then(
    () => undefined,
    (e: unknown) => e,
  )
  t.match(conflict, /out of order/, 'a seq conflict')
  t.notOk(conflict instanceof BurrowError, 'stays an internal error (INTERNAL at the surfaces)')

  // A replica that lost its lease: its commit, and the one queued behind it, are refused as taken over.
  token = 4
  const cut = log.turn('from a replica that lost its lease')
  const behind = log.turn('queued behind it')
  const first = repo.commit(cut.events, cut.record, token)
  const second = repo.commit(behind.events, behind.record, token)
  await fencedOut(t, first, log.id, 'the refused commit')
  await fencedOut(t, second, log.id, 'the commit queued behind it')
  t.same(await repo.events.readAfter(log.id, 0), stored, 'nothing of either stored')
  t.same(await row(), before, 'the session row untouched')
  t.ok(repo.writable(), 'a fencing refusal is not an outage: the store stays healthy')

  token = 6
  await lease(token)
  const retry = new SessionLog(log.id)
  for (const e of stored) retry.add(e.turn, { type: e.type, data: e.data })
  const fresh = retry.turn('the new owner')
  await repo.commit(fresh.events, fresh.record, token)
  t.equal((await row()).fence, '6')
})

t.test('leases: one holder at a time; an expired one is taken with a newer token, and its holder can no longer commit', async (t) => {
  const { db } = await setup(t)
  const { a, b } = await twoProcesses(t, db.url)
  const log = new SessionLog(sessionId(4))
  const created = log.create()
  await a.commit(created.events, created.record)
  const tenant = created.record.config.tenant
  t.equal(await b.leases.acquire(log.id, 'another-tenant'), undefined, 'another tenant’s session cannot be leased')
  const first = taken(await a.leases.acquire(log.id, tenant))!
  t.match(first, { token: 1, lastSeq: created.record.last_seq, previousOwner: null })
  t.same(await b.leases.acquire(log.id, tenant), { held: true, running: false }, 'held by a: b gets nothing (no turn runs, the row says)')
  const one = log.turn('under the first lease')
  await a.commit(one.events, one.record, first.token)
  t.equal(await first.renew(), true)
  // a stops renewing: once the lease expired, b takes it, sees a's commit, and a is fenced out.
  const second = (await eventually(async () => taken(await b.leases.acquire(log.id, tenant)), 5000))!
  t.match(second, { token: 2, lastSeq: one.record.last_seq, previousOwner: 'replica-a' })
  t.equal(await first.renew(), false, 'a learns it lost the lease')
  const stale = log.turn('from a, after it lost the lease')
  await fencedOut(t, a.commit(stale.events, stale.record, first.token), log.id, 'a, fenced out')
  t.equal(await b.events.lastSeq(log.id), one.record.last_seq, 'nothing of it stored')
  const fresh = new SessionLog(log.id)
  for (const e of await b.events.readAfter(log.id, 0)) fresh.add(e.turn, { type: e.type, data: e.data })
  const two = fresh.turn('under the second lease')
  await b.commit(two.events, two.record, second.token)
  await first.release() // a stale release ends nothing
  t.match(await a.leases.acquire(log.id, tenant), { held: true }, 'b still holds it')
  await second.release()
  t.match(await a.leases.acquire(log.id, tenant), { token: 3, previousOwner: 'replica-b' }, 'released: taken at once')
})

t.test('the projection writer lease: one holder, renewed while held, taken once expired or released', async (t) => {
  const { db, direct } = await setup(t)
  const { a, b } = await twoProcesses(t, db.url)
  const row = async () => (await direct.query("SELECT owner, token::int FROM leases WHERE tenant = ''")).rows
  t.equal(await a.projectionWriter.hold(), true, 'free: a takes it')
  t.equal(await b.projectionWriter.hold(), false, 'held by a')
  // Before the renewal: the database's expiry is at least a lease after this.
  const renewed = Date.now()
  t.equal(await a.projectionWriter.hold(), true, 'a renews it')
  t.same(await row(), [{ owner: 'replica-a', token: 1 }], 'one row under the empty tenant, renewed in place')
  // a stops renewing: b gets it once it expired, and a learns it at its next try.
  await eventually(() => b.projectionWriter.hold(), 5000)
  const waited = Date.now() - renewed
  t.ok(waited >= 950, `not before the lease ran out (${waited} ms after a's renewal)`)
  t.same(await row(), [{ owner: 'replica-b', token: 2 }])
  t.equal(await a.projectionWriter.hold(), false)
  await a.projectionWriter.release() // not a's to end
  t.equal(await a.projectionWriter.hold(), false, 'b still holds it')
  await b.projectionWriter.release()
  t.equal(await a.projectionWriter.hold(), true, 'released: taken at once')
  // The session queries on leases never meet it: no session is running, and none is listed.
  t.same(await a.sessions.runningTurns(), [])
})

t.test('text with NUL, astral and combining characters reads back exactly', async (t) => {
  const { db } = await setup(t)
  const repo = await open(db.url)
  t.teardown(() => repo.close())
  const odd = 'nul:\u0000 tab:\t emoji:🦡 combining:é quote:" backslash:\\ \\u0000 lone:\ud800'
  const log = new SessionLog(sessionId(3), config('tenant-a', { metadata: { note: odd }, system_prompt: odd }))
  for (const c of [log.create(), log.turn(odd)]) await repo.commit(c.events, c.record)
  t.same(await repo.events.readAfter(log.id, 0), log.events)
  t.same(await repo.sessions.get(log.id), log.record)
  t.same((await repo.sessions.list('tenant-a', {})).items[0]!.metadata, { note: odd })
})

t.test("delete leaves no row of the session in any table once the projection writer's mark goes, and only of that session", async (t) => {
  const { db, direct } = await setup(t)
  const repo = await open(db.url)
  t.teardown(() => repo.close())
  const gone = new SessionLog(sessionId(4))
  const kept = new SessionLog(sessionId(5))
  for (const l of [gone, kept]) {
    for (const c of [l.create(), l.turn('x')]) await repo.commit(c.events, c.record)
    await repo.idempotency.put(`tenant-a\u0000${l.id}\u0000k`, {
      fingerprint: 'f',
      created_at: Date.now(),
      outcome: { ok: true, value: 1 },
    })
    await repo.projection.projected(l.id, 1)
    await direct.query("INSERT INTO leases VALUES ('tenant-a', $1, 'r', 1, now())", [l.id])
  }
  await repo.deleteSession(gone.id, 'tenant-a')
  // Projected, so its files may be in the writer's directory, on another replica: a mark says so.
  t.same((await direct.query('SELECT session_id, checkpoint::int FROM projections ORDER BY checkpoint')).rows, [
    { session_id: gone.id, checkpoint: -1 },
    { session_id: kept.id, checkpoint: 1 },
  ])
  t.same((await repo.projection.pending()).sort(), [gone.id, kept.id].sort(), 'the mark is pending (and so is the other session)')
  t.equal(await repo.projection.checkpoint(gone.id), 0)
  await repo.projection.reset()
  t.ok((await repo.projection.pending()).includes(gone.id), 'a rebuild keeps the marks')
  await repo.projection.projected(kept.id, 1)
  await repo.projection.removed!(gone.id)
  for (const table of ['sessions', 'events', 'idempotency', 'projections', 'leases']) {
    const r = await direct.query(`SELECT session_id, count(*)::int AS n FROM ${table} GROUP BY 1`)
    t.same(
      r.rows.map((x) => x.session_id),
      [kept.id],
      `${table}: only the other session's rows`,
    )
  }
})

t.test('another tenant sees nothing: list, and an unknown tenant', async (t) => {
  const { db } = await setup(t)
  const repo = await open(db.url)
  t.teardown(() => repo.close())
  const a = new SessionLog(sessionId(6), config('tenant-a'))
  const b = new SessionLog(sessionId(7), config('tenant-b'))
  for (const l of [a, b]) await repo.commit(l.create().events, l.record!)
  t.same(
    (await repo.sessions.list('tenant-a', {})).items.map((i) => i.session_id),
    [a.id],
  )
  t.same(
    (await repo.sessions.list('tenant-b', {})).items.map((i) => i.session_id),
    [b.id],
  )
  t.same((await repo.sessions.list('tenant-c', {})).items, [])
  t.equal(await repo.sessions.tenantOf(b.id), 'tenant-b')
})

t.test('a database that is gone: reads and writes reject with STORE_UNAVAILABLE, and writable() turns false', async (t) => {
  const { db } = await setup(t)
  const repo = await open(db.url)
  t.teardown(() => repo.close())
  const log = new SessionLog(sessionId(8))
  await repo.commit(log.create().events, log.record!)
  await db.drop() // the database is gone for good; its connections are cut
  const code = async (p: Promise<unknown>) =>
    (
      (await p.then(
        () => null,
        (e: unknown) => e,
      )) as BurrowError | null
    )?.code
  t.equal(await code(repo.sessions.get(log.id)), 'STORE_UNAVAILABLE', 'a read')
  const turn = log.turn('lost')
  t.equal(await code(repo.commit(turn.events, turn.record)), 'STORE_UNAVAILABLE', 'a write')
  t.equal(repo.writable(), false)
})

t.test('an idle store notices the database gone when asked, and takes writes again by itself', async (t) => {
  const db = await tempDatabase(t, 'pgrepo')
  const admin = new URL(PG_ADMIN_URL)
  const proxy = new TcpProxy(admin.hostname, Number(admin.port || 5432))
  await proxy.start()
  t.teardown(() => proxy.stop())
  const repo = await open(Object.assign(new URL(db.url), { port: String(proxy.port) }).href)
  t.teardown(() => repo.close())
  const log = new SessionLog(sessionId(9))
  await repo.commit(log.create().events, log.record!)
  t.equal(repo.writable(), true)
  await proxy.stop()
  // Nothing writes: asking (as /readyz does) probes the database once nothing has reached it for a second.
  await eventually(() => !repo.writable(), 5_000)
  t.pass('writable() turned false with no request failing')
  await proxy.start()
  await eventually(() => repo.writable(), 5_000)
  t.pass('and true again once the database answers')
  const turn = log.turn('after the outage')
  await repo.commit(turn.events, turn.record)
  t.same(await repo.events.readAfter(log.id, 0), log.events, 'the log goes on')
})
