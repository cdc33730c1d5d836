// The projector renders from the committed events it is told about, within its bounds; past them
// (per session, or in all) it reads the log instead — and the files are the same bytes either way.
import t, { type Test } from 'tap'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createLogger } from '../../src/app/logger.js'
import { Projector, type ProjectorOptions } from '../../src/session/projector.js'
import { MemorySessionRepository } from '../../src/store/memory-session-repository.js'
import { SessionLog, sessionId } from '../contract/fixtures.js'

/** A projector over the reference repository; `reads` counts the projector's reads of the log. */
async function setup(t: Test, opts: Partial<ProjectorOptions>) {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-projector-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const repo = new MemorySessionRepository()
  const counter = { reads: 0 }
  const readAfter = repo.events.readAfter
  repo.events.readAfter = (...args) => {
    counter.reads++
    return readAfter(...args)
  }
  const projector = new Projector(repo, dir, createLogger('silent'), { debounceMs: 0, minIntervalMs: 0, ...opts })
  const commit = async (log: SessionLog, c: { events: any[]; record: any }) => {
    await repo.commit(c.events, c.record)
    projector.notify(log.id, c.events)
  }
  const files = async (id: string) => ({
    transcript: await readFile(join(dir, 'sessions', id, 'transcript.md'), 'utf8'),
    json: await readFile(join(dir, 'sessions', id, 'session.json'), 'utf8'),
  })
  return { projector, counter, commit, files }
}

t.test('within its bounds the projector never reads the log, and writes what a rebuild writes', async (t) => {
  const { projector, counter, commit, files } = await setup(t, { recentPerSession: 100, recentTotal: 100 })
  const log = new SessionLog(sessionId(1))
  for (const c of [log.create(), log.turn('one'), log.pausedTurn('two')]) await commit(log, c)
  await projector.idle()
  t.equal(counter.reads, 0, 'rendered from the events it was told about')
  const first = await files(log.id)
  t.match(first.transcript, /echo: one/)
  for (let i = 0; i < 3; i++) await commit(log, log.turn(`more ${i}`))
  await projector.idle()
  t.equal(counter.reads, 0, 'incremental projections too')
  const incremental = await files(log.id)
  await projector.rebuildAll()
  t.ok(counter.reads > 0, 'a rebuild reads the log')
  t.same(await files(log.id), incremental, 'same bytes as a rebuild from the log')
})

t.test('past the per-session bound it reads the log, and the files are the same', async (t) => {
  const { projector, counter, commit, files } = await setup(t, { recentPerSession: 5, recentTotal: 1000 })
  const log = new SessionLog(sessionId(2))
  for (const c of [log.create(), log.turn('a'), log.turn('b'), log.turn('c')]) await commit(log, c) // 10 events > 5
  await projector.idle()
  t.equal(counter.reads, 1, 'one read of the log for the session that outgrew its bound')
  const fromLog = await files(log.id)
  t.match(fromLog.transcript, /echo: a[\s\S]*echo: b[\s\S]*echo: c/)
  await projector.rebuildAll()
  t.same(await files(log.id), fromLog)
})

t.test('past the total bound the sessions that no longer fit read the log; the others do not', async (t) => {
  const { projector, counter, commit, files } = await setup(t, { recentPerSession: 100, recentTotal: 8 })
  const a = new SessionLog(sessionId(3))
  const b = new SessionLog(sessionId(4))
  for (const c of [a.create(), a.turn('a1'), a.turn('a2')]) await commit(a, c) // 7 events: fit
  for (const c of [b.create(), b.turn('b1')]) await commit(b, c) // 1 fits, then 3 do not
  await projector.idle()
  t.equal(counter.reads, 1, 'only the session that did not fit reads the log')
  const before = { a: await files(a.id), b: await files(b.id) }
  t.match(before.b.transcript, /echo: b1/)
  await projector.rebuildAll()
  t.same({ a: await files(a.id), b: await files(b.id) }, before)
})
