import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LmdbSessionRepository } from '../../src/store/lmdb-session-repository.js'
import { sessionStoreContract, type RepositoryFactory } from '../contract/session-store.contract.js'
import { eventStoreContract } from '../contract/event-store.contract.js'
import { SessionLog, config, sessionId } from '../contract/fixtures.js'

for (const durability of ['fsync', 'relaxed'] as const) {
  const factory: RepositoryFactory = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'burrow-lmdb-'))
    const open = () => LmdbSessionRepository.open(dir, { durability, idempotencyTtlMs: 24 * 3600 * 1000 })
    let repo = await open()
    return {
      repo,
      reopen: async () => (repo = await open()),
      cleanup: async () => {
        await repo.close().catch(() => undefined)
        await rm(dir, { recursive: true, force: true })
      },
    }
  }
  t.test(`session store contract (LMDB, ${durability})`, async (t) => sessionStoreContract(t, factory))
  t.test(`event store contract (LMDB, ${durability})`, async (t) => eventStoreContract(t, factory))
}

t.test('a batch is all or nothing: a write that throws stores none of the commits queued with it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-lmdb-'))
  const repo = await LmdbSessionRepository.open(dir, { durability: 'fsync', idempotencyTtlMs: 3_600_000 })
  t.teardown(async () => {
    await repo.close()
    await rm(dir, { recursive: true, force: true })
  })
  const a = new SessionLog(sessionId(1))
  const b = new SessionLog(sessionId(2))
  for (const c of [a.create(), b.create(), a.turn('kept')]) await repo.commit(c.events, c.record)
  const before = structuredClone(a.record)
  // Queued together, so one batch writes both; b's event cannot be serialized (a BigInt), which aborts the batch midway.
  const okA = a.turn('lost with the batch')
  const badB = b.add(0, { type: 'memory_indexed', data: { entries: 1n } })
  const results = await Promise.allSettled([repo.commit(okA.events, okA.record), repo.commit(badB.events, badB.record)])
  t.same(
    results.map((r) => r.status),
    ['rejected', 'rejected'],
    'every commit of the batch fails',
  )
  t.same(await repo.sessions.get(a.id), before, "a's snapshot is as before the batch")
  t.equal(await repo.events.lastSeq(a.id), 4)
  t.same(
    (await repo.events.readAfter(a.id, 0)).map((e) => e.seq),
    [1, 2, 3, 4],
    "none of a's queued events is stored",
  )
  t.equal(await repo.events.lastSeq(b.id), 1)
  // The store goes on: a commit that follows the stored log lands.
  const retry = new SessionLog(a.id)
  for (const e of await repo.events.readAfter(a.id, 0)) retry.add(e.turn, { type: e.type, data: e.data })
  const next = retry.turn('after the abort')
  await repo.commit(
    next.events.map((e) => ({ ...e, session_id: a.id })),
    next.record,
  )
  t.equal(await repo.events.lastSeq(a.id), 7)
})

t.test('tenantOf waits for a session only while its first commit is in flight', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-lmdb-'))
  const repo = await LmdbSessionRepository.open(dir, { durability: 'fsync', idempotencyTtlMs: 3_600_000 })
  t.teardown(async () => {
    await repo.close()
    await rm(dir, { recursive: true, force: true })
  })
  const log = new SessionLog(sessionId(1), config('tenant-b'))
  const order: string[] = []
  const created = log.create()
  const first = repo.commit(created.events, created.record).then(() => order.push('first commit'))
  const owner = await repo.sessions.tenantOf(log.id)
  order.push('owner')
  await first
  t.equal(owner, 'tenant-b', 'a session whose first commit is in flight is found once it lands')
  const turn = log.turn('while another tenant asks')
  const next = repo.commit(turn.events, turn.record).then(() => order.push('next commit'))
  t.equal(await repo.sessions.tenantOf(log.id), 'tenant-b')
  order.push('owner again')
  await next
  // Waiting there would tell another tenant that the session is being written: it answers at once, as an unknown id does.
  t.same(order, ['first commit', 'owner', 'owner again', 'next commit'], 'a later commit in flight is not waited for')
})
