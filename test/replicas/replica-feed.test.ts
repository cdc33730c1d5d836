// The replica feed in one process, over the real event hub and the in-memory repository's log:
// another replica's commits are read back and published in seq order per session whatever the
// speed of each read, its text deltas after the commits heard before them, one session's slow read
// never holds up another's, nothing is read for a session nobody here follows, failed reads are
// tried again, and a deletion reaches the replica after the commits heard before it.
import t from 'tap'
import type { EventStore } from '../../src/core/stores.js'
import type { StreamFrame } from '../../src/core/session-service.js'
import { EventHub } from '../../src/session/event-hub.js'
import { ReplicaFeed } from '../../src/replicas/replica-feed.js'
import { MemorySessionRepository } from '../../src/store/memory-session-repository.js'
import { SessionLog, sessionId } from '../contract/fixtures.js'
import { takeFrames } from '../helpers/frames.js'

/** The log another replica wrote, read through a gate the test opens (a slow or failing database). */
async function written(logs: SessionLog[], turns: number) {
  const repo = new MemorySessionRepository()
  const commits: Array<{ sid: string; first: number; last: number }> = []
  for (const log of logs) {
    for (const c of [log.create(), ...Array.from({ length: turns }, (_, i) => log.turn(`q${i}`))]) {
      await repo.commit(c.events, c.record)
      commits.push({ sid: log.id, first: c.events[0]!.seq, last: c.events.at(-1)!.seq })
    }
  }
  return { repo, commits }
}

interface Gate {
  reads: Array<{ sid: string; after: number }>
  hold: Map<string, Promise<void>>
  failures: Map<string, number>
}

function gated(store: EventStore, gate: Gate): EventStore {
  return {
    ...store,
    readAfter: async (sid, after, upTo, limit) => {
      gate.reads.push({ sid, after })
      await gate.hold.get(sid)
      const left = gate.failures.get(sid) ?? 0
      if (left > 0) {
        gate.failures.set(sid, left - 1)
        throw new Error('connection reset')
      }
      return store.readAfter(sid, after, upTo, limit)
    },
  }
}

const seqs = (fs: StreamFrame[]) => fs.flatMap((f) => (f.kind === 'event' ? [f.event.type === 'text_delta' ? 'delta' : f.event.seq] : []))

function setup(store: EventStore) {
  const hub = new EventHub({ bufferSize: 100, queueLimit: 1000, replicated: true })
  const errors: Array<{ err: unknown; sid: string }> = []
  const deleted: string[] = []
  const feed = new ReplicaFeed(
    hub,
    store,
    (err, sid) => errors.push({ err, sid }),
    (sid) => deleted.push(sid),
  )
  return { hub, feed, errors, deleted }
}

t.test('one session: commits in seq order whatever each read takes, a delta after the commits heard before it', async (t) => {
  const log = new SessionLog(sessionId(1))
  const { repo, commits } = await written([log], 3)
  let open!: () => void
  const gate: Gate = { reads: [], hold: new Map([[log.id, new Promise<void>((r) => (open = r))]]), failures: new Map() }
  const { hub, feed } = setup(gated(repo.events, gate))
  hub.open(log.id, 't')
  const sub = await hub.subscribeSession(log.id, undefined, 0, async () => [])
  for (const c of commits) feed.committed('t', c.sid, c.first, c.last)
  feed.delta('t', log.id, 4, 11, '2026-01-01T00:00:00.000Z', 'partial')
  await new Promise((r) => setTimeout(r, 20))
  t.equal(gate.reads.length, 1, 'one read at a time for the session')
  open()
  await feed.idle()
  const got = seqs(await takeFrames(sub, 11))
  t.same(got, [...Array.from({ length: 10 }, (_, i) => i + 1), 'delta'])
  t.ok(gate.reads.length <= commits.length, `no more reads than commits (${gate.reads.length})`)
})

t.test("a slow read of one session does not hold up another's", async (t) => {
  const slow = new SessionLog(sessionId(2))
  const fast = new SessionLog(sessionId(3))
  const { repo } = await written([slow, fast], 1)
  let open!: () => void
  const gate: Gate = { reads: [], hold: new Map([[slow.id, new Promise<void>((r) => (open = r))]]), failures: new Map() }
  const { hub, feed } = setup(gated(repo.events, gate))
  hub.open(slow.id, 't')
  hub.open(fast.id, 't')
  const slowSub = await hub.subscribeSession(slow.id, undefined, 0, async () => [])
  const fastSub = await hub.subscribeSession(fast.id, undefined, 0, async () => [])
  feed.committed('t', slow.id, 1, 4)
  feed.committed('t', fast.id, 1, 4)
  t.same(seqs(await takeFrames(fastSub, 4)), [1, 2, 3, 4], 'the fast session is published while the slow one waits')
  open()
  t.same(seqs(await takeFrames(slowSub, 4)), [1, 2, 3, 4])
  await feed.idle()
})

t.test('nobody follows the session here: nothing is read, the hub notes how far it got', async (t) => {
  const log = new SessionLog(sessionId(4))
  const { repo } = await written([log], 2)
  const gate: Gate = { reads: [], hold: new Map(), failures: new Map() }
  const { hub, feed } = setup(gated(repo.events, gate))
  hub.open(log.id, 't')
  feed.committed('t', log.id, 1, 7)
  await feed.idle()
  t.equal(gate.reads.length, 0, 'no read')
  t.equal(hub.knownSeq(log.id), 7)
  t.same(feed.watching(), { tenants: [], sessions: [] })
})

t.test('failed reads are tried again; past the retries the error is reported and the next commit catches up', async (t) => {
  const log = new SessionLog(sessionId(5))
  const { repo } = await written([log], 2)
  const gate: Gate = { reads: [], hold: new Map(), failures: new Map([[log.id, 2]]) }
  const { hub, feed, errors } = setup(gated(repo.events, gate))
  hub.open(log.id, 't')
  const sub = await hub.subscribeSession(log.id, undefined, 0, async () => [])
  feed.committed('t', log.id, 1, 4)
  await feed.idle()
  t.same(seqs(await takeFrames(sub, 4)), [1, 2, 3, 4], 'published after two failed reads')
  t.same(errors, [])
  gate.failures.set(log.id, 100)
  feed.committed('t', log.id, 5, 7)
  await feed.idle()
  t.equal(errors.length, 1, 'reported once retries ran out')
  t.equal(errors[0]!.sid, log.id)
  gate.failures.set(log.id, 0)
  const next = log.turn('q2')
  await repo.commit(next.events, next.record)
  feed.committed('t', log.id, 8, 10)
  await feed.idle()
  t.same(seqs(await takeFrames(sub, 6)), [5, 6, 7, 8, 9, 10], 'the next commit caught up from what was published')
})

t.test('a deletion reaches the replica after the commits heard before it', async (t) => {
  const log = new SessionLog(sessionId(6))
  const { repo } = await written([log], 1)
  let open!: () => void
  const gate: Gate = { reads: [], hold: new Map([[log.id, new Promise<void>((r) => (open = r))]]), failures: new Map() }
  const { hub, feed, deleted } = setup(gated(repo.events, gate))
  hub.open(log.id, 't')
  const sub = await hub.subscribeSession(log.id, undefined, 0, async () => [])
  feed.committed('t', log.id, 1, 4)
  feed.deleted('t', log.id)
  await new Promise((r) => setTimeout(r, 20))
  t.same(deleted, [], 'not before the commit heard first is published')
  open()
  await feed.idle()
  t.same(deleted, [log.id])
  t.same(seqs(await takeFrames(sub, 4)), [1, 2, 3, 4])
})
