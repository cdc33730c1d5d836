// A data directory reads back what it wrote, across reopen, with many value shapes: 80 sessions whose
// metadata objects all have different keys. (Values are JSON since store schema 3. Under schema 2 they
// were msgpack records, and an encoding change — `maxSharedStructures` without a `sharedStructuresKey` —
// looked fine until the environment was reopened and values no longer decoded; this test caught that,
// and guards any future encoding change the same way.)
import t, { type Test } from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import { LmdbSessionRepository } from '../../src/store/lmdb-session-repository.js'
import { config, SessionLog, sessionId } from '../contract/fixtures.js'

/** Sessions whose metadata objects all have different keys: 80 value shapes in the configs database alone. */
async function writeSessions(dir: string): Promise<SessionLog[]> {
  const repo = await LmdbSessionRepository.open(dir, { durability: 'relaxed', idempotencyTtlMs: 3_600_000 })
  const logs: SessionLog[] = []
  for (let i = 0; i < 80; i++) {
    const log = new SessionLog(sessionId(1000 + i), config('tenant-a', { metadata: { [`key_${i}`]: `v${i}`, [`n_${i}`]: String(i) } }))
    for (const c of [log.create(), log.turn(`question ${i}`), ...(i % 3 === 0 ? [log.pausedTurn(`tool ${i}`)] : [])])
      await repo.commit(c.events, c.record)
    logs.push(log)
  }
  await repo.close()
  return logs
}

async function readBack(t: Test, dir: string, logs: SessionLog[]): Promise<void> {
  const repo = await LmdbSessionRepository.open(dir, { durability: 'relaxed', idempotencyTtlMs: 3_600_000 })
  try {
    let same = 0
    for (const log of logs) {
      const got = await repo.sessions.get(log.id)
      if (isDeepStrictEqual(got, log.record)) same++
      else t.same(got, log.record, `session ${log.id}`)
      const events = await repo.events.readAfter(log.id, 0)
      if (!isDeepStrictEqual(events, log.events)) t.same(events, log.events, `events of ${log.id}`)
    }
    t.equal(same, logs.length, 'every snapshot reads back equal after reopening')
  } finally {
    await repo.close()
  }
}

t.test('80 sessions with 80 metadata shapes read back equal after reopening', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-env-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const logs = await writeSessions(dir)
  await readBack(t, dir, logs)
})
