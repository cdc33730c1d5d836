// A data directory written by the release with store schema 2 (test/fixtures/store-v2) is upgraded
// when the store opens it: every session reads back as that release read it, and the service goes on.
import t from 'tap'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { LmdbSessionRepository } from '../../src/store/lmdb-session-repository.js'
import { SchemaMismatchError } from '../../src/store/lmdb-env.js'
import { applyEvent, rebuild } from '../../src/session/session-reducer.js'
import { startBurrow } from '../helpers/harness.js'

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'store-v2')
type Name = 'plain' | 'tools' | 'notes' | 'compacted' | 'archived' | 'long' | 'idem' | 'running'
const expected = JSON.parse(gunzipSync(await readFile(join(FIXTURE, 'expected.json.gz'))).toString()) as {
  ids: Record<Name, string>
  sessions: Record<string, { id: string; record: any; events: any[] }>
  idempotency: { key: string; record: any }
}

/** A fresh data directory holding a copy of the schema-2 environment. */
async function v2Dir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-v2-'))
  await mkdir(join(dir, 'lmdb'))
  await writeFile(join(dir, 'lmdb', 'data.mdb'), gunzipSync(await readFile(join(FIXTURE, 'data.mdb.gz'))))
  return dir
}

// Records gained `history_generation` after the fixture was written; for a history without rolled-back turns it is the compaction count.
for (const s of Object.values(expected.sessions)) s.record.history_generation ??= s.record.compactions

const OPTS = { durability: 'fsync' as const, idempotencyTtlMs: 100 * 365 * 24 * 3_600_000 }

t.test('opening upgrades schema 2: every session, event and idempotency record reads back as the old release read it', async (t) => {
  const dir = await v2Dir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const repo = await LmdbSessionRepository.open(dir, { ...OPTS, fold: applyEvent })
  const sessions = Object.values(expected.sessions)
  t.same(repo.migrated, { from: 2, sessions: sessions.length, events: sessions.reduce((n, s) => n + s.events.length, 0) })
  for (const [name, s] of Object.entries(expected.sessions)) {
    const events = await repo.events.readAfter(s.id, 0)
    t.same(events, s.events, `${name}: the events`)
    t.same(await repo.sessions.get(s.id), s.record, `${name}: the snapshot`)
    t.same(rebuild(events), s.record, `${name}: rebuild(log) == snapshot`)
    t.equal(await repo.events.lastSeq(s.id), s.record.last_seq)
  }
  t.same(await repo.idempotency.get(expected.idempotency.key), expected.idempotency.record, 'idempotency records are carried over')
  t.same(await repo.sessions.runningTurns(), [expected.ids.running], 'the turn a crash left running is still known as running')
  const alpha = await repo.sessions.list('alpha', { limit: 100 })
  t.same(
    alpha.items.map((i) => i.session_id).sort(),
    sessions
      .filter((s) => s.record.config.tenant === 'alpha')
      .map((s) => s.id)
      .sort(),
  )
  t.same(
    (await repo.sessions.list('beta', { status: 'archived' })).items.map((i) => i.session_id),
    [expected.ids.archived],
  )
  t.same((await repo.projection.pending()).sort(), sessions.map((s) => s.id).sort(), 'every session is projected again')
  // The upgraded store takes new commits like any other.
  await repo.close()
  const again = await LmdbSessionRepository.open(dir, { ...OPTS, fold: applyEvent })
  t.equal(again.migrated, undefined, 'upgraded once')
  t.same(await again.sessions.get(expected.ids.long), expected.sessions.long!.record)
  await again.close()
})

t.test('without the reducer a schema-2 directory is refused, and left as it was', async (t) => {
  const dir = await v2Dir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const before = await readFile(join(dir, 'lmdb', 'data.mdb'))
  const err = await LmdbSessionRepository.open(dir, OPTS).catch((e: unknown) => e)
  t.type(err, SchemaMismatchError)
  t.match((err as Error).message, /schema version 2; this build reads version 3 and upgrades version 2 when the service opens it/)
  t.ok(before.equals(await readFile(join(dir, 'lmdb', 'data.mdb'))), 'not a byte changed')
  const repo = await LmdbSessionRepository.open(dir, { ...OPTS, fold: applyEvent })
  t.equal(repo.migrated?.sessions, Object.keys(expected.sessions).length)
  await repo.close()
})

t.test('the service on an upgraded directory: start-up closes the crashed turn, retries are answered, sessions go on', async (t) => {
  const dir = await v2Dir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  // The fixture's idempotency record is as old as the fixture and the service keeps records 24 h: the
  // service here runs on a clock an hour after the record was made, or the retry's answer would depend
  // on the day the test runs (it did: the record expired a day after the fixture was written).
  const realNow = Date.now
  const skew = expected.idempotency.record.created_at + 3_600_000 - realNow()
  Date.now = () => realNow() + skew
  t.teardown(() => {
    Date.now = realNow
  })
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb', BURROW_API_KEYS: 'ka:alpha,kb:beta' }, { dataDir: dir, token: 'ka' })
  t.teardown(() => h.close())
  t.ok(
    h.logs.some((l) => /upgraded the session store from schema 2/.test(l.msg) && l.sessions === Object.keys(expected.sessions).length),
    'the upgrade is logged',
  )
  const running = (await h.api.get(`/v1/sessions/${expected.ids.running}`)).body
  t.equal(running.messages.at(-1).role, 'user', 'the cut-off turn keeps its input')
  const events = await h.api.get(`/v1/sessions/${expected.ids.running}/event-log?after=${expected.sessions.running!.record.last_seq}`)
  t.equal(events.status, 200)
  const failed = events.body.events.find((e: any) => e.type === 'turn_failed')
  t.equal(failed?.data.reason, 'process_restarted', 'the turn a crash left running is closed at start-up')
  const retry = await h.api.turn(expected.ids.idem, { input: 'once only' }, { headers: { 'idempotency-key': 'idem-key-1' } })
  t.equal(retry.status, 200)
  t.equal(retry.body.turn, 1, 'the retry gets the first result, not a new turn')
  t.equal((await h.api.get(`/v1/sessions/${expected.ids.idem}`)).body.turn_count, 1)
  const next = await h.api.turn(expected.ids.compacted, { input: 'after the upgrade' })
  t.equal(next.status, 200)
  t.equal(next.body.first_seq, expected.sessions.compacted!.record.last_seq + 1, 'seqs go on from the old log')
  const view = (await h.api.get(`/v1/sessions/${expected.ids.compacted}`)).body
  t.equal(view.messages.length, expected.sessions.compacted!.record.messages.length + 2, 'the compacted history goes on from where it was')
  const other = await h.api.get(`/v1/sessions/${expected.ids.notes}`)
  t.equal(other.status, 404, "another tenant's session stays invisible")
  const notes = await h.api.get(`/v1/sessions/${expected.ids.notes}/notes`, { token: 'kb' })
  t.same(
    notes.body.notes.map((n: any) => [n.key, n.value]),
    [['deadline', 'Friday']],
  )
})
