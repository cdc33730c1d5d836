// The live-session table on its own: loading, creating, evicting, settling, and the commit path
// that tells listeners once the repository has made a commit durable.
import t from 'tap'
import { createLogger } from '../../src/app/logger.js'
import { BurrowError } from '../../src/core/errors.js'
import type { EventEnvelope } from '../../src/core/events.js'
import type { SessionRecord } from '../../src/core/session-record.js'
import { EventHub } from '../../src/session/event-hub.js'
import { LiveSessions } from '../../src/session/live-sessions.js'
import type { CommittedBatch, SessionListener } from '../../src/session/session-listener.js'
import { Turn } from '../../src/session/turn.js'
import { MemorySessionRepository } from '../../src/store/memory-session-repository.js'
import { config, SessionLog } from '../contract/fixtures.js'
import { sessionId, talk } from './fixtures.js'

const created = (id: string, tenant = 'tenant-a'): EventEnvelope<'session_created'> => ({
  seq: 1,
  session_id: id,
  turn: 0,
  type: 'session_created',
  at: new Date().toISOString(),
  data: { config: config(tenant) },
})

function table(opts: { repo?: MemorySessionRepository; listeners?: SessionListener[]; maxLive?: number } = {}) {
  const repository = opts.repo ?? new MemorySessionRepository()
  const hub = new EventHub({ bufferSize: 100, queueLimit: 100 })
  const sessions = new LiveSessions({
    repository,
    hub,
    listeners: opts.listeners ?? [],
    maxLive: opts.maxLive ?? 100,
    logger: createLogger('silent'),
  })
  return { repository, hub, sessions }
}

const recorder = () => {
  const told: CommittedBatch[] = []
  const deleted: string[] = []
  const listener: SessionListener = {
    committed: (b) => {
      told.push(b)
    },
    deleted: async (id) => {
      deleted.push(id)
    },
  }
  return { told, deleted, listener }
}

t.test('a stored session is loaded for its tenant only; an unknown or malformed id is not found', async (t) => {
  const repo = new MemorySessionRepository()
  const log = new SessionLog(sessionId(1), config('tenant-a'))
  for (const c of [log.create(), log.turn('hi')]) await repo.commit(c.events, c.record)
  const { sessions } = table({ repo })
  const s = await sessions.get('tenant-a', log.id)
  t.same(s.record, log.record)
  t.equal(sessions.get('tenant-a', log.id), s, 'live now: answered without a promise')
  t.match(
    await Promise.resolve(sessions.get('tenant-b', log.id)).catch((e: unknown) => e),
    { code: 'SESSION_NOT_FOUND' },
    "another tenant's",
  )
  t.match(await Promise.resolve(sessions.get('tenant-a', sessionId(2))).catch((e: unknown) => e), { code: 'SESSION_NOT_FOUND' })
  t.match(await Promise.resolve(sessions.get('tenant-a', 'nope')).catch((e: unknown) => e), { code: 'SESSION_NOT_FOUND' })
})

t.test('listeners are told of each commit once the repository made it durable, with what a compaction discarded', async (t) => {
  const repo = new MemorySessionRepository()
  let release!: () => void
  const gate = new Promise<void>((r) => {
    release = r
  })
  const commit = repo.commit.bind(repo)
  let held = false
  // Held commits are written later, with the record as it was when they were made (the reference repository checks it).
  repo.commit = async (events, record) => {
    const snapshot = structuredClone(record)
    if (held) await gate
    return commit(events, snapshot)
  }
  const { told, listener } = recorder()
  const { sessions } = table({ repo, listeners: [listener] })
  const s = await sessions.create(created(sessionId(3)))
  t.same(
    told.map((b) => b.events.map((e) => e.type)),
    [['session_created']],
    'the creation too',
  )
  t.equal(told[0]!.session, s)
  held = true
  talk(s, 3)
  await new Promise((r) => setImmediate(r))
  t.equal(told.length, 1, 'not before the repository is done')
  release()
  await sessions.settle(s)
  t.equal(told.length, 4, 'one per commit, in order')
  t.same(
    told.slice(1).map((b) => b.events[0]!.seq),
    [2, 5, 8],
  )
  t.notOk(told[1]!.discarded, 'no compaction, nothing discarded')

  const before = s.record.messages
  new Turn(s, 3).emit([
    {
      type: 'compaction_completed',
      data: { summary_tokens: 1, messages_before: 6, messages_after: 3, summary: 'S', discarded_seq_range: [2, 6] },
    },
  ])
  await sessions.settle(s)
  t.same(told.at(-1)!.discarded, { messages: before.slice(0, 4), seqs: [2, 3, 5, 6], turns: [1, 1, 2, 2] })
})

t.test('a listener that throws is logged; the session goes on', async (t) => {
  const { told, listener } = recorder()
  const { sessions } = table({
    listeners: [
      {
        committed: () => {
          throw new Error('boom')
        },
      },
      listener,
    ],
  })
  const s = await sessions.create(created(sessionId(4)))
  talk(s, 1)
  await sessions.settle(s)
  t.equal(told.length, 2, 'the next listener is told all the same')
  t.equal(s.broken, false)
})

t.test('past the limit the least recently used idle sessions are evicted; what runs or waits, or is watched, stays', async (t) => {
  const { sessions, hub } = table({ maxLive: 2 })
  const a = await sessions.create(created(sessionId(5)))
  a.lastActive = 1
  const b = await sessions.create(created(sessionId(6)))
  b.lastActive = 2
  const sub = await hub.subscribeSession(a.id, undefined, 1, async () => [])
  await sessions.create(created(sessionId(7)))
  t.not(await sessions.get('tenant-a', b.id), b, 'the idle one was evicted (and loads again from the store)')
  t.equal(sessions.get('tenant-a', a.id), a, 'a watched session stays')
  sub.close()
  const running = await sessions.create(created(sessionId(8)))
  running.running = new Turn(running, 0)
  running.lastActive = 0
  t.same(sessions.running(), [running.running])
  await sessions.create(created(sessionId(9)))
  t.equal(sessions.get('tenant-a', running.id), running, 'running work is never evicted')
})

t.test('a session whose commit failed is broken: settling says why, and the next lookup loads it again from the store', async (t) => {
  const repo = new MemorySessionRepository()
  const commit = repo.commit.bind(repo)
  let fail = false
  repo.commit = async (events, record: SessionRecord) => {
    if (fail) throw new BurrowError('STORE_UNAVAILABLE', 'disk full')
    return commit(events, record)
  }
  const { sessions } = table({ repo })
  const s = await sessions.create(created(sessionId(10)))
  talk(s, 1)
  await sessions.settle(s)
  fail = true
  talk(s, 1)
  t.match(await sessions.settle(s).catch((e: unknown) => e), { code: 'STORE_UNAVAILABLE' })
  t.ok(s.broken)
  fail = false
  const again = await sessions.get('tenant-a', s.id)
  t.not(again, s)
  t.equal(again.record.turn_count, 1, 'what the store holds')
})

t.test('forgetting a deleted session ends its streams; its listeners are told', async (t) => {
  const { told, deleted, listener } = recorder()
  const { sessions, hub } = table({ listeners: [listener] })
  const s = await sessions.create(created(sessionId(11)))
  const sub = await hub.subscribeSession(s.id, undefined, 1, async () => [])
  sessions.forget(s.id, { type: 'stream_closed', session_id: s.id, data: { reason: 'session_deleted' } })
  await sessions.deleted(s.id)
  t.same(deleted, [s.id])
  const frames = []
  for await (const batch of sub) frames.push(...batch)
  t.match(frames, [{ kind: 'control', control: { data: { reason: 'session_deleted' } } }])
  t.equal(told.length, 1)
})
