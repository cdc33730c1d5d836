// A memory data directory written by the release with layout 1 (test/fixtures/memory-v1: posting
// rows, a float32 copy of every vector, a saved index file with an unsaved tail) is upgraded when
// the store opens it: every entry reads back, searches answer as that release answered, the old
// rows are gone and the file is smaller, and the service goes on with it.
import t from 'tap'
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { Writable } from 'node:stream'
import { gunzipSync } from 'node:zlib'
import { pino } from 'pino'
import type { MemoryEntry } from '../../src/core/memory-store.js'
import { HashedEmbedder } from '../../src/memory/hashed-embedder.js'
import { HnswMemoryStore } from '../../src/memory/hnsw-memory-store.js'
import { openMemoryDb, type MemoryDb } from '../../src/memory/memory-db.js'
import { decodeBlock } from '../../src/memory/posting-blocks.js'
import { MemoryLayoutError } from '../../src/memory/memory-upgrade.js'
import { eventually, startBurrow } from '../helpers/harness.js'

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'memory-v1')
type Tenant = { entries: MemoryEntry[]; searches: Record<string, string[]>; count: number }
const expected = JSON.parse(await readFile(join(FIXTURE, 'expected.json'), 'utf8')) as Record<'alpha' | 'beta', Tenant>
const files = JSON.parse(gunzipSync(await readFile(join(FIXTURE, 'data.json.gz'))).toString()) as Record<string, string>
const embedder = new HashedEmbedder()

/** A fresh data directory holding a copy of the layout-1 files. */
async function v1Dir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-mem-v1-'))
  for (const [path, b64] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true })
    await writeFile(join(dir, path), Buffer.from(b64, 'base64'))
  }
  return dir
}

async function openStore(dir: string, logs: any[]): Promise<HnswMemoryStore> {
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l.trim()) logs.push(JSON.parse(l))
      cb()
    },
  })
  return HnswMemoryStore.open({ dataDir: dir, embedder, durability: 'fsync', logger: pino({ level: 'debug' }, sink) })
}

async function listAll(store: HnswMemoryStore, tenant: string): Promise<MemoryEntry[]> {
  const out: MemoryEntry[] = []
  let cursor: string | undefined
  do {
    const page = await store.list(tenant, { limit: 100, ...(cursor ? { cursor } : {}) })
    out.push(...page.items)
    cursor = page.next_cursor ?? undefined
  } while (cursor)
  return out
}

t.test('opening upgrades layout 1: entries, counts and searches read back as that release read them', async (t) => {
  const dir = await v1Dir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const dataFile = join(dir, 'memory', 'lmdb', 'data.mdb')
  const before = (await stat(dataFile)).size
  const logs: any[] = []
  let store = await openStore(dir, logs)
  const live = expected.alpha.count + expected.beta.count
  t.match(
    logs.filter((l) => l.msg === 'upgraded the memory store layout'),
    [{ from: 1, to: 2, entries: live }],
    'the upgrade is logged once',
  )
  t.ok((await stat(dataFile)).size < before / 2, `the data file is compacted (${before} → ${(await stat(dataFile)).size} bytes)`)
  for (const tenant of ['alpha', 'beta'] as const) {
    const want = expected[tenant]
    t.same(await listAll(store, tenant), want.entries, `${tenant}: every entry, in order, as written`)
    t.equal(await store.count(tenant), want.count)
    for (const e of want.entries.slice(0, 5)) t.same(await store.get(tenant, e.id), e)
    for (const [key, ids] of Object.entries(want.searches)) {
      const [mode, q] = key.split(/:(.*)/s) as ['keyword' | 'vector', string]
      if (mode === 'keyword')
        t.same(
          (await store.search({ tenant, text: q, limit: 5, mode })).map((h) => h.entry.id),
          ids,
          `${tenant} ${key}`,
        )
    }
  }
  // alpha's unsaved tail, and beta (never saved), had their vectors only in the dropped rows: they are embedded again from the content.
  await eventually(() => store.indexCovered('alpha') === 130 && store.indexCovered('beta') === 40)
  for (const tenant of ['alpha', 'beta'] as const) {
    for (const [key, ids] of Object.entries(expected[tenant].searches)) {
      const [mode, q] = key.split(/:(.*)/s) as ['keyword' | 'vector', string]
      if (mode === 'vector')
        t.same(
          (await store.search({ tenant, text: q, limit: 5, mode })).map((h) => h.entry.id),
          ids,
          `${tenant} ${key}`,
        )
    }
  }
  await store.close()

  const db: MemoryDb = openMemoryDb(dir, 'fsync')
  try {
    const names = [...db.root.getKeys()] as unknown[]
    t.notOk(names.includes('postings') || names.includes('vectors'), `the layout-1 databases are gone (${names.join(', ')})`)
    t.equal(db.meta.get('layout'), 2)
    for (const tenant of ['alpha', 'beta']) {
      const inBlocks: number[] = []
      for (const { key, value } of db.blocks.getRange({ start: [tenant, 0], end: [tenant, Infinity] }))
        decodeBlock(key[1] as number, value, (label) => inBlocks.push(label))
      t.same(
        inBlocks,
        [...db.entries.getKeys({ start: [tenant, 0], end: [tenant, Infinity] })].map((k) => k[1]),
        `${tenant}: postings for exactly the live entries (the deleted ones' words are not carried over)`,
      )
    }
  } finally {
    await db.root.close()
  }

  logs.length = 0
  store = await openStore(dir, logs)
  t.teardown(() => store.close())
  t.same(
    logs.filter((l) => /upgraded/.test(l.msg)),
    [],
    'upgraded once',
  )
  const [added] = await store.add([
    { tenant: 'beta', content: 'After the upgrade: the lighthouse keeper paid INV-2024-9999.', session_id: 't2', turn: null, seq: null },
  ])
  t.equal((await store.search({ tenant: 'beta', text: 'INV-2024-9999', limit: 1 }))[0]?.entry.id, added!.id, 'new entries are found')
  t.equal(await store.deleteSession('beta', 't2'), 29 + 1, 'and sessions deleted')
  t.equal(await store.count('beta'), 0)
})

t.test('the service on an upgraded directory: memory is listed and searched over HTTP', async (t) => {
  const dir = await v1Dir()
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const h = await startBurrow({ BURROW_MEMORY_STORE: 'hnsw', BURROW_API_KEYS: 'ka:alpha,kb:beta' }, { dataDir: dir, token: 'ka' })
  t.teardown(() => h.close())
  t.ok(
    h.logs.some((l) => l.msg === 'upgraded the memory store layout'),
    'the upgrade is logged',
  )
  const page = (await h.api.get('/v1/memory?limit=100')).body
  t.same(
    page.items.map((e: MemoryEntry) => e.id),
    expected.alpha.entries.slice(0, 100).map((e) => e.id),
  )
  const hits = (await h.api.get(`/v1/memory/search?q=${encodeURIComponent('INV-2024-1042')}&limit=3`)).body
  t.equal(hits.results[0]?.id, expected.alpha.searches['keyword:INV-2024-1042']![0], 'an identifier is found first')
})

t.test('a layout this build does not know (a newer release) is refused, and left as it was', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-mem-v3-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const db = openMemoryDb(dir, 'fsync')
  await db.meta.put('layout', 3)
  await db.root.close()
  const before = await readFile(join(dir, 'memory', 'lmdb', 'data.mdb'))
  const err = await openStore(dir, []).catch((e: unknown) => e)
  t.type(err, MemoryLayoutError)
  t.match((err as Error).message, /has layout 3; this build reads layout 2 and upgrades layout 1/)
  t.ok(before.equals(await readFile(join(dir, 'memory', 'lmdb', 'data.mdb'))), 'not a byte changed')
})
