// The repository of ephemeral mode: it finds nothing, keeps nothing and refuses what needs stored sessions.
import t from 'tap'
import { BurrowError } from '../../src/core/errors.js'
import { NullSessionRepository } from '../../src/store/null-session-repository.js'
import { SessionLog, sessionId } from '../contract/fixtures.js'

const code = async (f: () => unknown) => {
  try {
    await f()
    return undefined
  } catch (err) {
    return (err as BurrowError).code
  }
}

t.test('commits are accepted with nothing to wait for; lookups find nothing', async (t) => {
  const repo = new NullSessionRepository(60_000)
  const log = new SessionLog(sessionId(1))
  const c = log.create()
  t.equal(repo.commit(c.events, c.record), undefined, 'nothing to wait for: events are published at once')
  t.equal(await repo.sessions.get(log.id), undefined)
  t.equal(await repo.sessions.tenantOf(log.id), undefined)
  t.same(await repo.events.readAfter(log.id, 0), [])
  t.equal(await repo.events.lastSeq(log.id), 0)
  t.same(await repo.sessions.runningTurns(), [], 'nothing to recover at start-up')
  const ids = []
  for await (const id of repo.sessions.allIds()) ids.push(id)
  t.same(ids, [])
  t.equal(repo.writable(), true)
})

t.test('what needs stored sessions refuses with SESSION_PERSISTENCE_DISABLED', async (t) => {
  const repo = new NullSessionRepository(60_000)
  for (const [what, f] of [
    ['requirePersistence', () => repo.requirePersistence()],
    ['list', () => repo.sessions.list('tenant', {})],
    ['deleteSession', () => repo.deleteSession(sessionId(1), 'tenant')],
    ['projection', () => repo.projection.pending()],
  ] as const)
    t.equal(await code(f), 'SESSION_PERSISTENCE_DISABLED', what)
  const err = await code(() => repo.requirePersistence())
  t.equal(err, 'SESSION_PERSISTENCE_DISABLED')
  t.equal(new BurrowError('SESSION_PERSISTENCE_DISABLED').message, "Session persistence is disabled (build without 'session-store').")
})

t.test('idempotency records live in process memory', async (t) => {
  const repo = new NullSessionRepository(60_000)
  const rec = { fingerprint: 'f', created_at: Date.now(), outcome: { ok: true as const, value: 1 } }
  await repo.idempotency.put('k', rec)
  t.same(await repo.idempotency.get('k'), rec)
})
