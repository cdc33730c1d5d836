// Session ownership under leases, in one process: two "replicas" — each its own cache of live
// sessions, event hub, lease keeper and leased owner — over one in-memory store whose lease table
// follows PostgreSQL's rules (store/memory-leases.ts). What the multi-process tests show with real
// servers and PostgreSQL (test/replicas/pg-*.test.ts), here in milliseconds and step by step: one
// owner at a time, a cached session brought up to the store, a stopped owner's turn closed by the
// other, an old token fenced out, a lease kept after work handed over when asked.
import t from 'tap'
import { createLogger } from '../../src/app/logger.js'
import type { BurrowError } from '../../src/core/errors.js'
import type { EventEnvelope } from '../../src/core/events.js'
import { LeaseKeeper } from '../../src/replicas/lease-keeper.js'
import { LeasedOwner } from '../../src/replicas/leased-owner.js'
import { EventHub } from '../../src/session/event-hub.js'
import { LiveSessions } from '../../src/session/live-sessions.js'
import { MemoryLeaseTable } from '../../src/store/memory-leases.js'
import { MemorySessionRepository } from '../../src/store/memory-session-repository.js'
import { config } from '../contract/fixtures.js'
import { sessionId, talk } from '../session/fixtures.js'

const created = (id: string): EventEnvelope<'session_created'> => ({
  seq: 1,
  session_id: id,
  turn: 0,
  type: 'session_created',
  at: new Date().toISOString(),
  data: { config: config('tenant-a') },
})

function cluster(opts: { durationMs?: number; lingerMs?: number } = {}) {
  const table = new MemoryLeaseTable(new MemorySessionRepository(), opts.durationMs ?? 60_000)
  const owners = new Map<string, LeasedOwner>()
  const replica = (name: string) => {
    const repository = table.replica(name)
    // Asks the other replicas, as the change feed does, to give the lease up.
    const letGo = async (_tenant: string, id: string) => {
      for (const [other, owner] of owners) if (other !== name && (await owner.giveUp(id)) === true) return true
      return false
    }
    const sessions = new LiveSessions({
      repository,
      hub: new EventHub({ bufferSize: 100, queueLimit: 100, replicated: true }),
      maxLive: 100,
      logger: createLogger('silent'),
      ownership: (cache) => {
        const owner = new LeasedOwner(cache, new LeaseKeeper(repository.leases, createLogger('silent'), opts.lingerMs ?? 0, letGo))
        owners.set(name, owner)
        return owner
      },
    })
    return { name, sessions, owner: () => owners.get(name)! }
  }
  return { table, replica }
}

const code = (err: unknown) => ({ code: (err as BurrowError).code, reason: (err as BurrowError).data?.reason })

t.test('one owner at a time: SESSION_BUSY on the other replica while work holds the session', async (t) => {
  const { table, replica } = cluster()
  const a = replica('a')
  const b = replica('b')
  t.ok(a.sessions.leased, 'shared ownership')
  const id = sessionId(1)
  const sa = await a.sessions.create(created(id))
  let release!: () => void
  const holding = a.sessions.exclusive(sa, () => new Promise<void>((r) => (release = r)))
  await new Promise((r) => setImmediate(r))
  t.equal(table.holder(id), 'a')
  const sb = await b.sessions.get('tenant-a', id)
  await t.rejects(
    b.sessions.exclusive(sb, async () => t.fail('ran on b')),
    { code: 'SESSION_BUSY' },
    'the other replica is refused',
  )
  release()
  await holding
  t.equal(table.holder(id), null, 'released after the work (no linger)')
  await b.sessions.exclusive(sb, async () => t.equal(table.holder(id), 'b'))
  await a.sessions.close()
  await b.sessions.close()
})

t.test('a cached session is brought up to the store: on a read, and when work takes the lease', async (t) => {
  const { replica } = cluster()
  const a = replica('a')
  const b = replica('b')
  const id = sessionId(2)
  const sa = await a.sessions.create(created(id))
  const sb = await b.sessions.get('tenant-a', id)
  t.equal(sb.record.last_seq, 1)
  await a.sessions.exclusive(sa, async () => {
    talk(sa, 2)
    await a.sessions.settle(sa)
  })
  t.equal(sb.record.last_seq, 1, "b's cache is behind")
  const read = await b.sessions.current('tenant-a', id)
  t.equal(read.record.last_seq, sa.record.last_seq, 'a read reloads it')
  t.equal(read.record.turn_count, 2)
  await a.sessions.exclusive(sa, async () => {
    talk(sa, 1)
    await a.sessions.settle(sa)
  })
  await b.sessions.exclusive(sb, async () => {
    t.equal(sb.record.turn_count, 3, 'taking the lease reloads it before the work')
    talk(sb, 1)
  })
  await b.sessions.settle(sb)
  t.equal((await a.sessions.current('tenant-a', id)).record.turn_count, 4, 'and a sees b’s turn')
})

t.test("a stopped replica's running turn is closed by the other, and its old token is fenced out", async (t) => {
  const { table, replica } = cluster()
  const a = replica('a')
  const b = replica('b')
  const id = sessionId(3)
  const sa = await a.sessions.create(created(id))
  let stop!: () => void
  const stopped = new Promise<void>((r) => (stop = r))
  const work = a.sessions.exclusive(sa, async () => {
    sa.emit(1, [{ type: 'turn_started', data: { input: [{ type: 'text', text: 'hi' }], continuation: false } }])
    await a.sessions.settle(sa)
    await stopped
    // Still believing it owns the session: its next events.
    sa.emit(1, [{ type: 'turn_failed', data: { error: 'late', code: 'INTERNAL' } }])
    await a.sessions.settle(sa)
  })
  await new Promise((r) => setTimeout(r, 10))
  t.equal(await b.sessions.recover(), 0, 'a live owner’s turn is left alone')
  table.expire('a') // a stops renewing: its lease runs out
  t.equal(await b.sessions.recover(), 1, 'the expired owner’s turn is closed')
  const closed = await b.sessions.current('tenant-a', id)
  t.equal(closed.record.open_turn, null)
  const log = await table.replica('x').events.readAfter(id, 0)
  const last = log.at(-1)!
  t.equal(last.type, 'turn_failed')
  t.match(last.data, { code: 'INTERRUPTED', reason: 'process_restarted' })
  stop()
  const refused = await work.then(
    () => null,
    (err: unknown) => err,
  )
  t.same(code(refused), { code: 'STORE_UNAVAILABLE', reason: 'lease_lost' }, "the stopped owner's late commit is refused")
  t.equal((await table.replica('x').events.readAfter(id, 0)).length, log.length, 'nothing of it stored')
})

t.test('a lease kept after work is handed over when another replica asks, not waited out', async (t) => {
  const { table, replica } = cluster({ lingerMs: 60_000 })
  const a = replica('a')
  const b = replica('b')
  const id = sessionId(4)
  const sa = await a.sessions.create(created(id))
  await a.sessions.exclusive(sa, async () => undefined)
  t.equal(table.holder(id), 'a', 'kept after the work')
  await a.sessions.exclusive(sa, async () => t.equal(table.holder(id), 'a', 'the next work joins it'))
  const sb = await b.sessions.get('tenant-a', id)
  await b.sessions.exclusive(sb, async () => t.equal(table.holder(id), 'b', 'b asked, a let go'))
  t.equal(table.holder(id), 'b', 'b keeps it now')
  await b.sessions.close()
  t.equal(table.holder(id), null, 'released at shutdown')
  await a.sessions.close()
})

t.test('a deleted session is forgotten by its owner', async (t) => {
  const { replica } = cluster({ lingerMs: 60_000 })
  const a = replica('a')
  const id = sessionId(5)
  const sa = await a.sessions.create(created(id))
  await a.sessions.exclusive(sa, async () => undefined)
  t.ok(a.owner().fence(id) > 0, 'a token while it owns it')
  a.sessions.deletedRemotely(id)
  t.equal(a.owner().fence(id), 0, 'forgotten')
  await a.sessions.close()
})
