// The database going away under a real server process on BURROW_SESSION_STORE=postgres: the store
// fault chapter with the database behind a loopback proxy that is stopped and started again, and
// backends terminated (pg_terminate_backend) again and again during turns. No exit, no unhandled
// rejection; STORE_UNAVAILABLE while it lasts; ready again without a restart; nothing acknowledged lost.
import t from 'tap'
import { spawnServer } from '../helpers/child-server.js'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { Api, sleep } from '../helpers/harness.js'
import { dbUrl, PG_ADMIN_URL, tempDatabase, terminateBackends } from '../helpers/pg.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'
import { tempDir } from '../helpers/temp-dir.js'
import { storeFaultChapter } from './store-faults.chapter.js'

const pgEnv = (url: string, dataDir: string) => ({
  BURROW_SESSION_STORE: 'postgres',
  BURROW_DATABASE_URL: url,
  BURROW_PG_POOL_SIZE: '4',
  BURROW_MEMORY_STORE: 'off',
  BURROW_COMPACTION: 'off',
  BURROW_DATA_DIR: dataDir,
})

t.test('postgres: the database unreachable during turns (a proxy stopped, then started again)', async (t) => {
  const db = await tempDatabase(t, 'outage')
  const admin = new URL(PG_ADMIN_URL)
  const proxy = new TcpProxy(admin.hostname, Number(admin.port || 5432))
  await proxy.start()
  t.teardown(() => proxy.stop())
  const viaProxy = Object.assign(new URL(dbUrl(db.name)), { port: String(proxy.port) }).href
  const run = await storeFaultChapter(t, {
    name: 'postgres',
    env: pgEnv(viaProxy, await tempDir(t, 'pg-outage')),
    readsNeedStore: true,
    breakStore: () => proxy.stop(),
    healStore: () => proxy.start(),
  })
  t.comment(JSON.stringify(run))
})

t.test('postgres: backends terminated again and again during turns', async (t) => {
  const db = await tempDatabase(t, 'terminate')
  const fake = await startFakeLlm({ openaiKey: 'k' })
  t.teardown(() => fake.close())
  // Restarted below as a supervisor restarts a replica: same id, so it ends the leases its killed predecessor kept.
  const env = {
    ...pgEnv(db.url, await tempDir(t, 'pg-terminate')),
    BURROW_REPLICA_ID: 'pg-terminate',
    OPENAI_API_KEY: 'k',
    OPENAI_BASE_URL: `${fake.url}/v1`,
  }
  let server = await spawnServer(env)
  let exits = 0
  server.child.once('exit', () => exits++)
  t.teardown(() => {
    server.child.kill('SIGKILL')
  })
  const api = new Api(server.url)
  const ids: string[] = []
  for (let i = 0; i < 4; i++) ids.push(await api.createSession())
  const acked = new Map<string, string[]>(ids.map((id) => [id, []]))
  const statuses = new Map<number, number>()
  let stop = false
  const lanes = ids.map(async (id) => {
    for (let i = 0; !stop; i++) {
      const input = `${id.slice(-6)} turn ${i}`
      const r = await api.turn(id, { input })
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
      if (r.status === 200) acked.get(id)!.push(input)
      else if (r.status !== 503 || r.body.code !== 'STORE_UNAVAILABLE') t.fail(`unexpected ${r.status} ${JSON.stringify(r.body)}`)
    }
  })
  let terminated = 0
  for (let k = 0; k < 15; k++) {
    await sleep(150)
    terminated += await terminateBackends(db.name)
  }
  stop = true
  await Promise.all(lanes)
  t.comment(`responses by status: ${JSON.stringify(Object.fromEntries(statuses))}; ${terminated} backends terminated`)
  t.ok(terminated > 0, 'backends were terminated under load')
  t.equal(exits, 0, 'the process is alive')
  const end = Date.now() + 10_000
  while ((await api.get('/readyz')).status !== 200 && Date.now() < end) await sleep(50)
  t.equal((await api.get('/readyz')).status, 200, 'ready again without a restart')
  for (const id of ids) {
    const r = await api.turn(id, { input: `${id} after` })
    t.equal(r.status, 200, 'every session takes its next turn')
    acked.get(id)!.push(`${id} after`)
  }
  // A fresh process on the same database has every acknowledged turn, in a gapless log.
  server.child.kill('SIGKILL')
  await new Promise((r) => server.child.once('exit', r))
  server = await spawnServer(env)
  const again = new Api(server.url)
  let lost = 0
  let acknowledged = 0
  for (const id of ids) {
    // The whole log, page by page (a quiet machine acknowledges over a thousand events per session).
    const log: Array<{ seq: number; type: string; data: any }> = []
    for (;;) {
      const page = (await again.get(`/v1/sessions/${id}/event-log?after=${log.at(-1)?.seq ?? 0}&limit=1000`)).body
      log.push(...page.events)
      if (page.events.length === 0 || log.at(-1)!.seq >= page.last_seq) break
    }
    t.ok(
      log.every((e, i) => e.seq === i + 1),
      'the log is gapless',
    )
    const inputs = new Set(log.filter((e) => e.type === 'turn_started').map((e) => JSON.stringify(e.data.input)))
    for (const input of acked.get(id)!) {
      acknowledged++
      if (![...inputs].some((s) => s.includes(input))) lost++
    }
    t.equal((await again.turn(id, { input: 'after the restart' })).status, 200)
  }
  t.ok(acknowledged > ids.length, `${acknowledged} turns acknowledged`)
  t.equal(lost, 0, 'none of them lost')
})
