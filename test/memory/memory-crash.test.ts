// kill -9 while the HNSW index is still taking acknowledged entries in the background (and
// again while a restarted server embeds them anew): every acknowledged entry is there after
// the restart, found at once, and the index catches up.
import t from 'tap'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { spawnServer, type ChildServer } from '../helpers/child-server.js'
import { Api, eventually } from '../helpers/harness.js'

const ENV = { BURROW_MEMORY_STORE: 'hnsw', BURROW_SESSION_STORE: 'lmdb', BURROW_DURABILITY: 'fsync', LOG_LEVEL: 'info' }
const text = (i: number) =>
  `Record ${i}: crate ${(i * 7919) % 10007} left dock ${i % 13} on ship ${['Aurora', 'Borealis', 'Cygnus', 'Draco'][i % 4]} at ${i % 24}h.`

async function backlog(url: string): Promise<number> {
  const m = /^burrow_memory_index_backlog (\d+)$/m.exec(await (await fetch(`${url}/metrics`)).text())
  return Number(m?.[1] ?? NaN)
}

async function kill9(server: ChildServer): Promise<void> {
  const exit = once(server.child, 'exit')
  server.child.kill('SIGKILL')
  await exit
}

async function listIds(api: Api): Promise<string[]> {
  const ids: string[] = []
  let cursor: string | null = null
  do {
    const page: { items: Array<{ id: string }>; next_cursor: string | null } = (
      await api.get(`/v1/memory?limit=100${cursor ? `&cursor=${cursor}` : ''}`)
    ).body
    ids.push(...page.items.map((e) => e.id))
    cursor = page.next_cursor
  } while (cursor)
  return ids
}

t.test('kill -9 during background indexing loses nothing; the restarted server finds everything at once and catches up', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'burrow-mem-kill-'))
  let server = await spawnServer({ ...ENV, BURROW_DATA_DIR: dataDir })
  t.teardown(async () => {
    if (server.child.exitCode === null && server.child.signalCode === null) await kill9(server)
    await rm(dataDir, { recursive: true, force: true })
  })
  let api = new Api(server.url)
  const acked: string[] = []
  for (let b = 0; b < 4; b++) {
    const res = await api.post(
      '/v1/memory',
      Array.from({ length: 1000 }, (_, i) => ({ content: text(b * 1000 + i) })),
    )
    t.equal(res.status, 201)
    acked.push(...res.body.ids)
  }
  const waiting = await backlog(server.url)
  t.ok(waiting > 0, `killed while ${waiting} acknowledged entries were not in the index yet`)
  await kill9(server)

  for (const round of ['after the first kill', 'after a kill during the catch-up']) {
    server = await spawnServer({ ...ENV, BURROW_DATA_DIR: dataDir })
    api = new Api(server.url)
    t.same(await listIds(api), acked, `${round}: every acknowledged entry, in order`)
    const hit = (await api.get(`/v1/memory/search?q=${encodeURIComponent(text(3999))}&limit=1`)).body.results[0]
    t.equal(hit?.id, acked[3999], `${round}: the last one is found at once`)
    if (round === 'after the first kill') {
      t.ok((await backlog(server.url)) > 0, 'the restarted server embeds the unsaved entries again in the background')
      await kill9(server)
    }
  }
  t.ok(await eventually(async () => (await backlog(server.url)) === 0, 60_000), 'and the index catches up')
  const res = await api.post('/v1/memory', [{ content: 'One more after two crashes: the lighthouse at Cape Wrath.' }])
  t.equal(res.status, 201)
  t.equal(
    (await api.get(`/v1/memory/search?q=${encodeURIComponent('lighthouse Cape Wrath')}&limit=1`)).body.results[0]?.id,
    res.body.ids[0],
    'a new fact on a new topic is found first by its words',
  )
  const exit = once(server.child, 'exit')
  server.child.kill('SIGTERM')
  t.equal((await exit)[0], 0, 'a clean stop')
})
