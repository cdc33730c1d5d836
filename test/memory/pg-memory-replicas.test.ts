// Memory on PostgreSQL across real server processes on one database (BURROW_MEMORY_STORE=postgres):
// an entry added on A is found on B within 1 s, a deletion on A leaves B's results within 1 s,
// tenants stay apart across replicas, an Idempotency-Key retried on the other replica adds nothing,
// and a replica restarted — with its local copy, or on an empty data directory — serves what the
// database holds. Then the database going away: 503 STORE_UNAVAILABLE, no exit, recovery by itself.
import t, { type Test } from 'tap'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { spawnServer, stopServer, type ChildServer } from '../helpers/child-server.js'
import { Api, sleep } from '../helpers/harness.js'
import { dbUrl, PG_ADMIN_URL, tempDatabase } from '../helpers/pg.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'
import { tempDir } from '../helpers/temp-dir.js'

const env = (url: string, dataDir: string, sessions = 'postgres') => ({
  BURROW_SESSION_STORE: sessions,
  BURROW_MEMORY_STORE: 'postgres',
  BURROW_DATABASE_URL: url,
  BURROW_PG_POOL_SIZE: '4',
  BURROW_COMPACTION: 'off',
  BURROW_DATA_DIR: dataDir,
  BURROW_API_KEYS: 'ka:acme,kb:globex',
})

async function start(t: Test, e: Record<string, string>): Promise<ChildServer> {
  const s = await spawnServer(e)
  t.teardown(() => stopServer(s))
  return s
}

const contents = async (api: Api, q: string) => {
  const r = await api.get(`/v1/memory/search?q=${encodeURIComponent(q)}&limit=10`)
  if (r.status !== 200) throw new Error(`search answered ${r.status}: ${JSON.stringify(r.body)}`)
  return (r.body.results as Array<{ content: string }>).map((h) => h.content)
}

/** Milliseconds until `check` holds (polled every 20 ms), or fails the test after `within` ms. */
async function until(t: Test, what: string, check: () => Promise<boolean>, within = 1000): Promise<number> {
  const t0 = performance.now()
  for (;;) {
    if (await check()) return performance.now() - t0
    if (performance.now() - t0 > within) {
      t.fail(`${what}: not within ${within} ms`)
      return Infinity
    }
    await sleep(20)
  }
}

const HERON = 'The grey heron nests by the mill pond every April.'
const OTTER = 'An otter was seen under the stone bridge at dawn.'
const KITE = 'A red kite circles the barley field after the harvest.'

t.test('two replicas on one database: adds, deletes and tenants cross within 1 s; a restarted replica serves the database', async (t) => {
  const db = await tempDatabase(t, 'memrep')
  const dirB = await tempDir(t, 'memrep-b')
  const a = await start(t, env(db.url, await tempDir(t, 'memrep-a')))
  let b = await start(t, env(db.url, dirB))
  const aAcme = new Api(a.url, 'ka')
  const aGlobex = new Api(a.url, 'kb')
  let bAcme = new Api(b.url, 'ka')
  let bGlobex = new Api(b.url, 'kb')
  // B has the tenant in use (its copy polled) before A adds, as a busy replica would.
  t.same(await contents(bAcme, 'heron'), [])

  const added = await aAcme.post('/v1/memory', [{ content: HERON }, { content: OTTER }])
  t.equal(added.status, 201)
  const [heronId, otterId] = added.body.ids as string[]
  const seen = await until(
    t,
    'an entry added on A is found on B',
    async () => (await contents(bAcme, 'heron nests mill pond'))[0] === HERON,
  )
  t.comment(`added on A → found on B after ${Math.round(seen)} ms`)
  t.equal((await bAcme.get(`/v1/memory/${heronId}`)).body.content, HERON, 'read by id on B at once')

  // Tenants: globex sees nothing of acme's on either replica, and the other way round.
  t.same(await contents(bGlobex, 'heron nests mill pond'), [])
  t.equal((await bGlobex.get(`/v1/memory/${heronId}`)).status, 404)
  t.equal((await bGlobex.post('/v1/memory', [{ content: KITE }])).status, 201)
  await until(t, "globex's entry reaches A", async () => (await contents(aGlobex, 'red kite barley'))[0] === KITE)
  t.notOk((await contents(aAcme, 'red kite barley')).includes(KITE), "acme never sees globex's entry")

  // A deletion on A leaves B's results.
  t.equal((await aAcme.delete(`/v1/memory/${heronId}`)).status, 204)
  const gone = await until(
    t,
    'an entry deleted on A leaves B',
    async () => !(await contents(bAcme, 'heron nests mill pond')).includes(HERON),
  )
  t.comment(`deleted on A → gone from B after ${Math.round(gone)} ms`)
  t.equal((await bAcme.get(`/v1/memory/${heronId}`)).status, 404)

  // Idempotency-Key: the retry on the other replica answers the first result and adds nothing.
  const body = [{ content: 'The lock keeper opens the weir at high tide.' }]
  const first = await aAcme.post('/v1/memory', body, { headers: { 'idempotency-key': 'weir-1' } })
  const retry = await bAcme.post('/v1/memory', body, { headers: { 'idempotency-key': 'weir-1' } })
  t.same(retry.body, first.body, 'the same ids')
  t.equal((await bAcme.get('/v1/memory?limit=50')).body.items.length, 2, 'otter and weir: added once')

  // B restarted on its data directory, after A added and deleted meanwhile: its copy catches up.
  await stopServer(b)
  t.equal((await aAcme.delete(`/v1/memory/${otterId}`)).status, 204)
  t.equal((await aAcme.post('/v1/memory', [{ content: 'Swifts return to the church tower in May.' }])).status, 201)
  b = await start(t, env(db.url, dirB))
  bAcme = new Api(b.url, 'ka')
  t.equal(
    (await contents(bAcme, 'swifts church tower'))[0],
    'Swifts return to the church tower in May.',
    'added meanwhile: found after the restart',
  )
  t.notOk((await contents(bAcme, 'otter stone bridge dawn')).includes(OTTER), 'deleted meanwhile: not found after the restart')

  // A third replica on an empty data directory makes its copy from the database.
  const dirC = await tempDir(t, 'memrep-c')
  let c = await start(t, env(db.url, dirC, 'lmdb'))
  let cAcme = new Api(c.url, 'ka')
  t.equal((await contents(cAcme, 'swifts church tower'))[0], 'Swifts return to the church tower in May.')
  t.same(
    await contents(cAcme, 'weir high tide lock keeper'),
    await contents(bAcme, 'weir high tide lock keeper'),
    'the same ranking on both',
  )

  // A damaged local copy is a cache: thrown away at start-up and made again from the database.
  await stopServer(c)
  await writeFile(join(dirC, 'memory-replica', 'memory', 'lmdb', 'data.mdb'), Buffer.alloc(16_384, 0xa7))
  c = await start(t, env(db.url, dirC, 'lmdb'))
  cAcme = new Api(c.url, 'ka')
  t.ok(
    c.lines.some((l) => /local copy of memory is damaged/.test(l.msg)),
    'the damaged copy is logged',
  )
  t.equal((await contents(cAcme, 'swifts church tower'))[0], 'Swifts return to the church tower in May.', 'and made again')
  bGlobex = new Api(b.url, 'kb')
  t.same(await contents(bGlobex, 'red kite barley'), [KITE])
})

t.test('the database going away: memory answers 503 STORE_UNAVAILABLE, no exit, and recovers by itself', async (t) => {
  const db = await tempDatabase(t, 'memout')
  const admin = new URL(PG_ADMIN_URL)
  const proxy = new TcpProxy(admin.hostname, Number(admin.port || 5432))
  await proxy.start()
  t.teardown(() => proxy.stop())
  const viaProxy = Object.assign(new URL(dbUrl(db.name)), { port: String(proxy.port) }).href
  const s = await start(t, env(viaProxy, await tempDir(t, 'memout'), 'lmdb'))
  let exited = false
  s.child.once('exit', () => (exited = true))
  const api = new Api(s.url, 'ka')
  t.equal((await api.post('/v1/memory', [{ content: HERON }])).status, 201)
  t.same(await contents(api, 'heron'), [HERON])

  await proxy.stop()
  const add = await api.post('/v1/memory', [{ content: OTTER }])
  t.equal(add.status, 503)
  t.equal(add.body.code, 'STORE_UNAVAILABLE')
  t.equal((await api.get('/v1/memory?limit=5')).body.code, 'STORE_UNAVAILABLE')
  await until(t, 'searches refuse once the copy is stale', async () => (await api.get('/v1/memory/search?q=heron')).status === 503, 5000)
  t.equal((await api.get('/v1/memory/search?q=heron')).body.code, 'STORE_UNAVAILABLE')
  await until(t, '/readyz reports not ready', async () => (await api.get('/readyz')).status === 503, 5000)

  await proxy.start()
  await until(
    t,
    'memory works again without a restart',
    async () => (await api.post('/v1/memory', [{ content: OTTER }])).status === 201,
    15_000,
  )
  await until(t, '/readyz ready again', async () => (await api.get('/readyz')).status === 200, 5000)
  t.same((await contents(api, 'otter heron')).sort(), [HERON, OTTER].sort())
  t.notOk(exited, 'the server never exited')
})
