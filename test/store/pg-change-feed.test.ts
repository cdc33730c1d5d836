// The change feed between replicas on its own, on a real PostgreSQL database: two feeds, as two
// replicas would hold them. What one announces reaches the other's sink in order and never its
// own; a long delta is cut to fit NOTIFY and arrives whole; interrupts and lease requests are
// answered by id (and time out when nobody answers); a listener cut off reconnects, and the
// sessions watched that changed meanwhile are caught up as commits.
import t, { type Test } from 'tap'
import { adminQuery, tempDatabase } from '../helpers/pg.js'
import { PgChangeFeed, type ChangeFeedSink, type PgChangeFeedOptions } from '../../src/store/pg-change-feed.js'
import { PgSessionRepository } from '../../src/store/pg-session-repository.js'
import { SessionLog, sessionId } from '../contract/fixtures.js'
import { eventually } from '../helpers/harness.js'

interface Heard {
  calls: Array<[string, ...unknown[]]>
  sink: ChangeFeedSink
  watched: { tenants: string[]; sessions: Array<{ sessionId: string; tenant: string }> }
}

function recorder(): Heard {
  const calls: Heard['calls'] = []
  const watched: Heard['watched'] = { tenants: [], sessions: [] }
  return {
    calls,
    watched,
    sink: {
      committed: (...a) => void calls.push(['committed', ...a]),
      delta: (...a) => void calls.push(['delta', ...a]),
      deleted: (...a) => void calls.push(['deleted', ...a]),
      watching: () => watched,
    },
  }
}

async function feeds(t: Test, extra: { a?: Partial<PgChangeFeedOptions>; b?: Partial<PgChangeFeedOptions> } = {}) {
  const db = await tempDatabase(t, 'feed')
  // The schema (sessions, events) the catch-up reads.
  const repo = await PgSessionRepository.open({ url: db.url, poolSize: 2, replicaId: 'schema', idempotencyTtlMs: 3_600_000 })
  t.teardown(() => repo.close())
  const heardA = recorder()
  const heardB = recorder()
  const listening: Array<[string, boolean]> = []
  const errors: string[] = []
  const make = (name: string, heard: Heard, more: Partial<PgChangeFeedOptions> = {}) => {
    const feed = new PgChangeFeed({
      url: db.url,
      replicaId: name,
      sink: heard.sink,
      onListening: (up) => listening.push([name, up]),
      onError: (_err, what) => errors.push(`${name}: ${what}`),
      ...more,
    })
    t.teardown(() => feed.close())
    return feed
  }
  const a = make('a', heardA, extra.a)
  const b = make('b', heardB, extra.b)
  await Promise.all([a.start(), b.start()])
  t.ok(a.listening && b.listening, 'both listen')
  return { db, repo, a, b, heardA, heardB, listening, errors }
}

t.test("one replica's commits, deltas and deletions reach the other in order, not itself", async (t) => {
  const { a, heardA, heardB, errors } = await feeds(t)
  a.committed('t1', 's1', 1, 3)
  a.delta('t1', 's1', 1, 3, '2026-01-01T00:00:00.000Z', 'Hel')
  a.delta('t1', 's1', 1, 3, '2026-01-01T00:00:00.000Z', 'lo')
  a.committed('t1', 's1', 4, 5)
  a.deleted('t1', 's2')
  const long = 'é'.repeat(20_000) // past a NOTIFY payload: sent in pieces
  a.delta('t1', 's1', 2, 5, '2026-01-01T00:00:01.000Z', long)
  await eventually(
    () => heardB.calls.some((c) => c[0] === 'delta' && c[4] === 5 && heardB.calls.filter((x) => x[4] === 5).length > 1),
    10_000,
  )
  await new Promise((r) => setTimeout(r, 200))
  const kinds = heardB.calls.map((c) => (c[0] === 'delta' ? `delta ${c[3]}` : `${c[0]} ${c[2]}`))
  t.same(kinds.slice(0, 4), ['committed s1', 'delta 1', 'committed s1', 'deleted s2'], 'in the order they were made')
  const first = heardB.calls.filter((c) => c[0] === 'delta' && c[3] === 1).map((c) => c[6])
  t.equal(first.join(''), 'Hello', 'consecutive deltas of a turn, merged or not, carry the whole text')
  const pieces = heardB.calls.filter((c) => c[0] === 'delta' && c[3] === 2).map((c) => c[6] as string)
  t.ok(pieces.length > 1, `the long delta came in ${pieces.length} pieces`)
  t.equal(pieces.join(''), long, 'and whole')
  t.same(heardB.calls[0], ['committed', 't1', 's1', 1, 3])
  t.same(heardA.calls, [], 'a replica does not hear itself')
  t.same(errors, [])
})

t.test('interrupts and lease requests are answered by id; nobody answering is a timeout', async (t) => {
  let release!: () => void
  const ended = new Promise<void>((r) => (release = r))
  const { a, b } = await feeds(t, {
    b: {
      interrupts: async (_tenant, id, found) => {
        if (id !== 'running-on-b') return null
        found(7)
        await ended
        return 7
      },
      letGo: async (_tenant, id) => (id === 'kept-on-b' ? true : id === 'busy-on-b' ? false : null),
    },
  })
  const interrupted = a.interrupt('t', 'running-on-b', 2_000, 5_000)
  await new Promise((r) => setTimeout(r, 300))
  release()
  t.equal(await interrupted, 7, 'found, then answered once the turn ended')
  const started = Date.now()
  t.equal(await a.interrupt('t', 'nowhere', 300, 5_000), null, 'no replica runs it')
  t.ok(Date.now() - started < 2_000, 'after the find timeout')
  t.equal(await a.letGo('t', 'kept-on-b', 2_000), true, 'the holder gave it up')
  t.equal(await a.letGo('t', 'busy-on-b', 2_000), false, 'work holds it there')
  t.equal(await a.letGo('t', 'not-held', 300), false, 'nobody holds it: no answer, a timeout')
  t.equal(await b.interrupt('t', 'running-on-b', 300, 300), null, 'a replica does not answer its own request')
})

t.test('a listener cut off reconnects and catches up the watched sessions that changed meanwhile', async (t) => {
  const { db, repo, b, heardB, listening } = await feeds(t)
  const log = new SessionLog(sessionId(42))
  const tenant = log.cfg.tenant
  const c0 = log.create()
  await repo.commit(c0.events, c0.record)
  heardB.watched.sessions.push({ sessionId: log.id, tenant })
  await adminQuery("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'burrow b listener'", [
    db.name,
  ])
  await eventually(() => listening.some(([n, up]) => n === 'b' && !up), 10_000)
  t.notOk(b.listening, 'not listening while cut off (the replica is not ready)')
  const c1 = log.turn('while b was away')
  await repo.commit(c1.events, c1.record) // announced by nobody: only the catch-up can tell b
  await eventually(() => b.listening, 10_000)
  await eventually(() => heardB.calls.some((c) => c[0] === 'committed' && c[2] === log.id), 10_000)
  const caught = heardB.calls.find((c) => c[0] === 'committed' && c[2] === log.id)!
  t.equal(caught[1], tenant)
  // Its first seq is where the events stored since the outage begin (by their time); the replica
  // feed reads from what it last published either way.
  t.equal(caught[4], c1.record.last_seq, 'up to the last stored seq')
})
