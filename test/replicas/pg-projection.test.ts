// The projection files with PostgreSQL (docs/scaling.md, The projection), on real server processes:
// with BURROW_PROJECTION=on one replica at a time writes them — elected by a lease — whichever
// replica ran the turns; kill -9 of the writer hands the writing to the other within the lease,
// and it writes what the dead one left pending; a session deleted through a replica that is not
// the writer loses its files in the writer's directory too. Without the setting nothing is written,
// and a deletion still removes the files a replica's directory holds from when it wrote them.
import t from 'tap'
import { existsSync } from 'node:fs'
import { readFile, readdir } from 'node:fs/promises'
import { join } from 'node:path'
import pg from 'pg'
import { spawnServer, stopServer } from '../helpers/child-server.js'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { Api, eventually } from '../helpers/harness.js'
import { tempDatabase } from '../helpers/pg.js'
import { tempDir } from '../helpers/temp-dir.js'
import { twoReplicas } from './replicas.js'

const LEASE_MS = 2000
const model = 'openai:gpt-4o-mini'

/** The sessions projected in a data directory (none when `sessions/` was never made). */
async function projected(dir: string): Promise<string[]> {
  return existsSync(join(dir, 'sessions')) ? (await readdir(join(dir, 'sessions'))).sort() : []
}
const transcript = (dir: string, id: string) => readFile(join(dir, 'sessions', id, 'transcript.md'), 'utf8').catch(() => '')

t.test('BURROW_PROJECTION=on with two replicas: one writes, and the other takes over when it is killed', async (t) => {
  const fake = await startFakeLlm({ openaiKey: 'k' })
  t.teardown(() => fake.close())
  const { a, b, db, dirs } = await twoReplicas(t, {
    prefix: 'projection',
    leaseMs: LEASE_MS,
    llmUrl: fake.url,
    env: { BURROW_PROJECTION: 'on' },
  })
  const A = new Api(a.url)
  const B = new Api(b.url)
  const wrote = (lines: any[]) => lines.filter((l) => /^this replica writes the projection now/.test(l.msg ?? '')).length
  // A started first and found the lease free; B found it taken.
  t.equal(wrote(a.lines), 1, 'replica-a was elected')
  t.equal(wrote(b.lines), 0, 'replica-b was not')
  t.ok(b.lines.some((l) => /^another replica writes the projection/.test(l.msg ?? '')))
  t.ok(a.lines.some((l) => l.msg?.startsWith('burrow listening') && l.projection === 'on (one elected replica writes)'))

  // Turns on both replicas: every session's files appear in A's directory, none in B's.
  const sessions: string[] = []
  for (const [i, api] of [A, B, A, B].entries()) {
    const id = await api.createSession({ model })
    fake.enqueue({ text: `answer ${i}` })
    t.equal((await api.turn(id, { input: `question ${i}` })).status, 200)
    sessions.push(id)
  }
  await eventually(async () => {
    for (const [i, id] of sessions.entries()) if (!(await transcript(dirs.a, id)).includes(`answer ${i}`)) return false
    return true
  }, 3 * LEASE_MS)
  // B's own projector, were it writing, would have written its sessions within its 100 ms debounce,
  // well before A heard of them (A reads other replicas' commits from the checkpoints at each renewal).
  t.same(await projected(dirs.a), [...sessions].sort(), "the writer's directory has every session")
  t.same(await projected(dirs.b), [], 'the other replica wrote nothing')

  // Deleted through B: the files are in A's directory, and A removes them (the deletion's mark).
  t.equal((await B.delete(`/v1/sessions/${sessions[1]}`)).status, 204)
  await eventually(async () => !(await projected(dirs.a)).includes(sessions[1]!), 3 * LEASE_MS)
  await eventually(async () => (await db.query('SELECT 1 FROM projections WHERE checkpoint < 0')).rowCount === 0, 3 * LEASE_MS)
  t.pass("a session deleted through the other replica left the writer's directory, and its mark the database")

  // The writer is frozen, turns run on B, and the writer dies: they are pending in the database.
  a.child.kill('SIGSTOP')
  const later: string[] = []
  for (let i = 0; i < 2; i++) {
    const id = i === 0 ? sessions[3]! : await B.createSession({ model })
    fake.enqueue({ text: `after the freeze ${i}` })
    t.equal((await B.turn(id, { input: `later ${i}` })).status, 200)
    later.push(id)
  }
  a.child.kill('SIGKILL')
  const killed = Date.now()
  const pending = await db.query(
    `SELECT s.session_id FROM sessions s LEFT JOIN projections p USING (tenant, session_id) WHERE s.last_seq > coalesce(p.checkpoint, 0)`,
  )
  t.same(pending.rows.map((r) => r.session_id).sort(), [...later].sort(), 'the turns run on B are pending')

  await eventually(async () => {
    for (const [i, id] of later.entries()) if (!(await transcript(dirs.b, id)).includes(`after the freeze ${i}`)) return false
    return true
  }, LEASE_MS + 5000)
  const tookMs = Date.now() - killed
  t.comment(`replica-b wrote the pending sessions ${tookMs} ms after kill -9 of the writer (lease ${LEASE_MS} ms)`)
  t.ok(tookMs <= LEASE_MS + 2000, 'within the lease + 2 s')
  t.equal(wrote(b.lines), 1, 'replica-b took the writer lease')
  t.match(
    await transcript(dirs.b, sessions[3]!),
    /question 3[\s\S]*answer 3[\s\S]*later 0/,
    'the whole transcript, not only what was pending',
  )
  t.same(await projected(dirs.b), [...later].sort(), 'the new writer wrote what was pending, not what the old one had written')
  // A turn's last commit may land after the transcript showed its answer: the writer catches up at its next pass.
  const caughtUp = await eventually(async () => {
    const left = await db.query(
      `SELECT s.session_id FROM sessions s LEFT JOIN projections p USING (tenant, session_id) WHERE s.last_seq > coalesce(p.checkpoint, 0)`,
    )
    return left.rowCount === 0
  }, 2 * LEASE_MS).catch(() => false)
  t.ok(caughtUp, 'nothing is pending any more')
})

t.test('PostgreSQL without BURROW_PROJECTION writes no files; a deletion removes those a replica holds', async (t) => {
  const fake = await startFakeLlm({ openaiKey: 'k' })
  t.teardown(() => fake.close())
  const database = await tempDatabase(t, 'projection_off')
  const dir = await tempDir(t, 'projection-off')
  const env = {
    BURROW_SESSION_STORE: 'postgres',
    BURROW_DATABASE_URL: database.url,
    BURROW_PG_POOL_SIZE: '3',
    BURROW_MEMORY_STORE: 'off',
    BURROW_DATA_DIR: dir,
    BURROW_REPLICA_ID: 'only',
    OPENAI_API_KEY: 'k',
    OPENAI_BASE_URL: `${fake.url}/v1`,
  }
  const db = new pg.Client({ connectionString: database.url })
  await db.connect()
  t.teardown(() => db.end())

  // First with the projection on (one replica: it is elected at once): a session's files.
  const first = await spawnServer({ ...env, BURROW_PROJECTION: 'on' })
  t.teardown(() => stopServer(first))
  const old = await new Api(first.url).createSession({ model })
  fake.enqueue({ text: 'kept in files' })
  await new Api(first.url).turn(old, { input: 'hello' })
  await stopServer(first) // a stop finishes the projection
  t.match(await transcript(dir, old), /kept in files/, 'written with BURROW_PROJECTION=on')

  // Then without the setting: nothing new is written, even once a stop has finished all its work.
  const server = await spawnServer(env)
  t.teardown(() => stopServer(server))
  t.ok(
    server.lines.some((l) => l.msg?.startsWith('burrow listening') && l.projection === 'off'),
    'the start-up line says so',
  )
  const api = new Api(server.url)
  const id = await api.createSession({ model })
  fake.enqueue({ text: 'no files' })
  t.equal((await api.turn(id, { input: 'hi' })).status, 200)
  t.equal((await api.delete(`/v1/sessions/${old}`)).status, 204)
  await stopServer(server)
  t.same(await projected(dir), [], 'no files for the new session, and the old one’s removed by its deletion')
  t.equal((await db.query('SELECT count(*)::int AS n FROM projections WHERE session_id = $1', [id])).rows[0].n, 0, 'no checkpoint')
})
