// Data directories written with older store schemas (test/fixtures/store-v2, store-v3) are upgraded
// when the store opens them: every session reads back as the old code read it, and the service goes on.
import t from 'tap'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { LmdbSessionRepository } from '../../src/store/lmdb-session-repository.js'
import { open } from 'lmdb'
import { SchemaMismatchError } from '../../src/store/lmdb-env.js'
import { config, SessionLog, sessionId } from '../contract/fixtures.js'
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
    t.equal(await repo.sessions.tenantOf(s.id), s.record.config.tenant, `${name}: the owner (schema 4's small record)`)
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
  t.match((err as Error).message, /schema version 2; this build reads version 4 and upgrades version 2 when the service opens it/)
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

const FIXTURE_V3 = join(import.meta.dirname, '..', 'fixtures', 'store-v3')
type NameV3 = 'plain' | 'large' | 'paused' | 'archived' | 'deleted'
const expectedV3 = JSON.parse(gunzipSync(await readFile(join(FIXTURE_V3, 'expected.json.gz'))).toString()) as Record<
  NameV3,
  { id: string; tenant: string; record: any; events: any[] }
>

/** A fresh data directory holding a copy of the schema-3 environment. */
async function v3Dir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-v3-'))
  await mkdir(join(dir, 'lmdb'))
  await writeFile(join(dir, 'lmdb', 'data.mdb'), gunzipSync(await readFile(join(FIXTURE_V3, 'data.mdb.gz'))))
  return dir
}

t.test('opening upgrades schema 3: each session gets its tenant record, and everything else reads back the same', async (t) => {
  const dir = await v3Dir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const repo = await LmdbSessionRepository.open(dir, OPTS)
  const stored = Object.values(expectedV3).filter((s) => s.record !== null)
  t.same(repo.migrated, { from: 3, sessions: stored.length, events: 0 }, 'no reducer needed: nothing is replayed')
  for (const [name, s] of Object.entries(expectedV3)) {
    t.equal(await repo.sessions.tenantOf(s.id), s.record ? s.tenant : undefined, `${name}: the owner`)
    t.same((await repo.sessions.get(s.id)) ?? null, s.record, `${name}: the snapshot`)
    t.same(await repo.events.readAfter(s.id, 0), s.events, `${name}: the events`)
  }
  t.same(
    (await repo.sessions.list('beta', { limit: 10 })).items.map((i) => i.session_id).sort(),
    [expectedV3.large.id, expectedV3.archived.id].sort(),
  )
  // Sessions go on, new ones are recorded, and a deleted one loses its record.
  const large = expectedV3.large
  const next = new SessionLog(large.id, large.record.config)
  for (const e of large.events) next.add(e.turn, { type: e.type, data: e.data })
  const turn = next.turn('after the upgrade')
  await repo.commit(turn.events, turn.record)
  const fresh = new SessionLog(sessionId(100), config('gamma'))
  const created = fresh.create()
  await repo.commit(created.events, created.record)
  t.equal(await repo.sessions.tenantOf(fresh.id), 'gamma')
  await repo.deleteSession(expectedV3.plain.id, 'alpha')
  t.equal(await repo.sessions.tenantOf(expectedV3.plain.id), undefined)
  await repo.close()
  const again = await LmdbSessionRepository.open(dir, OPTS)
  t.teardown(() => again.close())
  t.equal(again.migrated, undefined, 'upgraded once')
  t.same(await again.sessions.get(large.id), turn.record)
  t.equal(await again.sessions.tenantOf(large.id), 'beta')
})

t.test('the service on a directory of schema 3: the upgrade is logged, and another tenant still finds nothing', async (t) => {
  const dir = await v3Dir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb', BURROW_API_KEYS: 'ka:alpha,kb:beta' }, { dataDir: dir, token: 'ka' })
  t.teardown(() => h.close())
  t.ok(
    h.logs.some((l) => /upgraded the session store from schema 3/.test(l.msg) && l.sessions === 4),
    'the upgrade is logged',
  )
  const large = expectedV3.large
  t.equal((await h.api.get(`/v1/sessions/${large.id}`)).status, 404, "another tenant's session stays invisible")
  const own = await h.api.get(`/v1/sessions/${large.id}`, { token: 'kb' })
  t.equal(own.status, 200)
  t.equal(own.body.system_prompt, large.record.config.system_prompt)
  t.equal((await h.api.get(`/v1/sessions/${expectedV3.plain.id}`)).body.messages.length, expectedV3.plain.record.messages.length)
})

t.test('a directory of a newer schema is refused, and left as it was', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-v5-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const env = open({ path: join(dir, 'lmdb') })
  await env.openDB<unknown, string>({ name: 'meta' }).put('schema_version', 5)
  await env.close()
  const before = await readFile(join(dir, 'lmdb', 'data.mdb'))
  const err = await LmdbSessionRepository.open(dir, { ...OPTS, fold: applyEvent }).catch((e: unknown) => e)
  t.type(err, SchemaMismatchError)
  t.match((err as Error).message, /schema version 5; this build reads version 4\./)
  t.ok(before.equals(await readFile(join(dir, 'lmdb', 'data.mdb'))), 'not a byte changed')
})
