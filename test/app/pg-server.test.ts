// The real server process on BURROW_SESSION_STORE=postgres (a database of its own per test): a turn
// end to end against the offline provider, streamed and as JSON; an idempotent retry; the list;
// SSE replay from the log after a restart; delete; and the start-ups it must refuse (exit 78).
import t from 'tap'
import { SCHEMA_VERSION } from '../../src/store/pg-schema.js'
import { startServer, stopServer } from '../helpers/child-server.js'
import { Api } from '../helpers/harness.js'
import { dbUrl, tempDatabase } from '../helpers/pg.js'
import { assertRefused } from '../helpers/startup-faults.js'
import { tempDir } from '../helpers/temp-dir.js'

const pgEnv = (url: string, dataDir: string) => ({
  BURROW_SESSION_STORE: 'postgres',
  BURROW_DATABASE_URL: url,
  BURROW_PG_POOL_SIZE: '3',
  BURROW_MEMORY_STORE: 'off',
  BURROW_DATA_DIR: dataDir,
  BURROW_REPLICA_ID: 'replica-a',
  LOG_LEVEL: 'info',
})

async function listening(env: Record<string, string>) {
  const out = await startServer(env)
  if (out.kind !== 'listening') throw new Error(`the server did not start (${out.code}): ${out.stderr}`)
  return out.server
}

t.test('a session on PostgreSQL: turns, idempotency, list, replay after a restart, delete', async (t) => {
  const db = await tempDatabase(t, 'server')
  // Trust auth ignores the password: it is there to show it is never logged.
  const url = Object.assign(new URL(db.url), { username: 'postgres', password: 'hunter2-secret' }).href
  const env = pgEnv(url, await tempDir(t, 'pg-server'))
  let server = await listening(env)
  t.teardown(() => stopServer(server))
  const started = server.lines.find((l) => l.address)
  t.equal(started.database, `127.0.0.1:5432/${db.name}`, 'the start-up line names the database')
  t.equal(started.replica_id, 'replica-a')
  t.equal(started.capabilities.session_store, true)
  t.equal(server.lines.find((l) => /migrated the session database/.test(l.msg))?.to, SCHEMA_VERSION)
  let api = new Api(server.url)
  t.equal((await api.get('/readyz')).status, 200)

  const id = await api.createSession({ metadata: { who: 'pg' } })
  const stream = await api.sse(`/v1/sessions/${id}/turns`, { method: 'POST', body: { input: 'hello over sse' } })
  t.equal(stream.status, 200)
  const frames = await stream.until((f) => f.event === 'turn_completed', 10_000)
  stream.close()
  t.ok(
    frames.some((f) => f.event === 'text_delta'),
    'text deltas streamed',
  )
  const first = await api.turn(id, { input: 'hello as json' }, { headers: { 'idempotency-key': 'k-1' } })
  t.equal(first.status, 200)
  t.match(first.body, { turn: 2, status: 'completed', output_text: /hello as json/ })
  const retried = await api.turn(id, { input: 'hello as json' }, { headers: { 'idempotency-key': 'k-1' } })
  t.same(retried.body, first.body, 'a retry with the key returns the first result')
  t.equal((await api.turn(id, { input: 'other' }, { headers: { 'idempotency-key': 'k-1' } })).body.code, 'IDEMPOTENCY_CONFLICT')
  const other = await api.createSession()
  const list = await api.get('/v1/sessions?limit=1')
  t.same(
    list.body.items.map((i: any) => i.session_id),
    [other],
    'newest first',
  )
  const next = await api.get(`/v1/sessions?limit=1&cursor=${list.body.next_cursor}`)
  t.same(
    next.body.items.map((i: any) => ({ id: i.session_id, metadata: i.metadata, turns: i.turn_count })),
    [{ id, metadata: { who: 'pg' }, turns: 2 }],
  )
  const view = (await api.get(`/v1/sessions/${id}`)).body
  t.equal(view.turn_count, 2)

  // A new process: the session, its log and the idempotency record come from the database.
  await stopServer(server)
  server = await listening(env)
  api = new Api(server.url)
  const replay = await api.sse(`/v1/sessions/${id}/events`, { headers: { 'last-event-id': '2' } })
  const replayed = await replay.until((f) => Number(f.id) === view.last_seq, 10_000)
  replay.close()
  const seqs = replayed.filter((f) => f.id).map((f) => Number(f.id))
  t.same(
    seqs,
    Array.from({ length: view.last_seq - 2 }, (_, i) => i + 3),
    'replay from the log after seq 2, gapless',
  )
  t.same(
    (await api.turn(id, { input: 'hello as json' }, { headers: { 'idempotency-key': 'k-1' } })).body,
    first.body,
    'the retry after a restart',
  )
  t.same((await api.get(`/v1/sessions/${id}`)).body.messages, view.messages)
  const third = await api.turn(id, { input: 'after the restart' })
  t.equal(third.body.turn, 3)

  t.equal((await api.delete(`/v1/sessions/${id}`)).status, 204)
  t.equal((await api.get(`/v1/sessions/${id}`)).status, 404)
  for (const table of ['sessions', 'events', 'idempotency']) {
    const r = await adminQueryOn(db.name, `SELECT count(*)::int AS n FROM ${table} WHERE session_id = $1`, [id])
    t.equal(r, 0, `no ${table} row of the deleted session`)
  }
  const logs = JSON.stringify(server.lines) + server.stderr.join('')
  t.notMatch(logs, /hunter2-secret/, 'the password is never logged')
})

t.test('start-up refuses a database with a newer schema, one it cannot reach, and a missing URL (exit 78)', async (t) => {
  const db = await tempDatabase(t, 'refuse')
  const dir = await tempDir(t, 'pg-refuse')
  const first = await listening(pgEnv(db.url, dir))
  await stopServer(first)
  await adminQueryOn(db.name, "INSERT INTO schema_version (version, description) VALUES ($1, 'from a newer release')", [SCHEMA_VERSION + 1])
  await assertRefused(t, await startServer(pgEnv(db.url, dir)), ['schema version', String(SCHEMA_VERSION + 1), `/${db.name}`])
  // Nothing listens on port 1.
  await assertRefused(t, await startServer(pgEnv('postgres://postgres@127.0.0.1:1/nothing', dir)), ['127.0.0.1:1/nothing', 'ECONNREFUSED'])
  // A configuration error lists every bad variable, one per line.
  const unset = await startServer({ ...pgEnv('', dir), BURROW_DATABASE_URL: '' })
  t.equal(unset.kind === 'exited' && unset.code, 78, 'no URL: exit 78')
  t.match(
    unset.kind === 'exited' ? unset.stderr : '',
    /BURROW_DATABASE_URL must be set to a postgres:\/\/ URL when BURROW_SESSION_STORE=postgres/,
  )
})

/** One statement on database `name` of the test server; returns `n` of the first row when it has one. */
async function adminQueryOn(name: string, text: string, values: unknown[]): Promise<number | undefined> {
  const { default: pg } = await import('pg')
  const c = new pg.Client({ connectionString: dbUrl(name) })
  await c.connect()
  try {
    return (await c.query(text, values)).rows[0]?.n
  } finally {
    await c.end()
  }
}
