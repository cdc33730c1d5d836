// Memory data directories written by older releases are upgraded when the store opens them:
// layout 1 (test/fixtures/memory-v1: posting rows, a float32 copy of every vector) and layout 2
// (test/fixtures/memory-v2: posting blocks, entries that carry their own field names), each with
// a saved index file and an unsaved tail. Every entry reads back, searches answer as that release
// answered, the entries are encoded against the shared structures, the file is compacted, and the
// service goes on with it.
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
import { MEMORY_LAYOUT, openMemoryDb, type MemoryDb } from '../../src/memory/memory-db.js'
import { decodeBlock } from '../../src/memory/posting-blocks.js'
import { MemoryLayoutError } from '../../src/memory/memory-upgrade.js'
import { eventually, startBurrow } from '../helpers/harness.js'

type Tenant = { entries: MemoryEntry[]; searches: Record<string, string[]>; count: number }
type Expected = Record<'alpha' | 'beta', Tenant>
const embedder = new HashedEmbedder()

async function fixture(layout: 1 | 2): Promise<{ expected: Expected; files: Record<string, string> }> {
  const dir = join(import.meta.dirname, '..', 'fixtures', `memory-v${layout}`)
  return {
    expected: JSON.parse(await readFile(join(dir, 'expected.json'), 'utf8')) as Expected,
    files: JSON.parse(gunzipSync(await readFile(join(dir, 'data.json.gz'))).toString()) as Record<string, string>,
  }
}
const fixtures = { 1: await fixture(1), 2: await fixture(2) }

/** A fresh data directory holding a copy of a fixture's files. */
async function oldDir(layout: 1 | 2 = 1): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `burrow-mem-v${layout}-`))
  for (const [path, b64] of Object.entries(fixtures[layout].files)) {
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

for (const layout of [1, 2] as const)
  t.test(`opening upgrades layout ${layout}: entries, counts and searches read back as that release read them`, async (t) => {
    const { expected } = fixtures[layout]
    const dir = await oldDir(layout)
    t.teardown(() => rm(dir, { recursive: true, force: true }))
    const dataFile = join(dir, 'memory', 'lmdb', 'data.mdb')
    const before = (await stat(dataFile)).size
    const logs: any[] = []
    let store = await openStore(dir, logs)
    const live = expected.alpha.count + expected.beta.count
    t.match(
      logs.filter((l) => l.msg === 'upgraded the memory store layout'),
      [{ from: layout, to: MEMORY_LAYOUT, entries: live }],
      'the upgrade is logged once',
    )
    const after = (await stat(dataFile)).size
    // Layout 1's rows were most of the file; layout 2's entries shrink to about half.
    t.ok(after < (layout === 1 ? before / 2 : before), `the data file is compacted (${before} → ${after} bytes)`)
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
      t.equal(db.meta.get('layout'), MEMORY_LAYOUT)
      for (const tenant of ['alpha', 'beta']) {
        const inBlocks: number[] = []
        for (const { key, value } of db.blocks.getRange({ start: [tenant, 0], end: [tenant, Infinity] }))
          decodeBlock(key[1] as number, value, (label) => inBlocks.push(label))
        t.same(
          inBlocks,
          [...db.entries.getKeys({ start: [tenant, 0], end: [tenant, Infinity] })].map((k) => k[1]),
          `${tenant}: postings for exactly the live entries (the deleted ones' words are not carried over)`,
        )
        // Each entry holds its values only: its field names are in the shared structures.
        const raw = [...db.entries.getKeys({ start: [tenant, 0], end: [tenant, Infinity] })].map((k) => db.entries.getBinary(k)!)
        t.equal(raw.filter((b) => b.includes('created_at')).length, 0, `${tenant}: no entry carries its field names`)
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
  const dir = await oldDir()
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
    fixtures[1].expected.alpha.entries.slice(0, 100).map((e) => e.id),
  )
  const hits = (await h.api.get(`/v1/memory/search?q=${encodeURIComponent('INV-2024-1042')}&limit=3`)).body
  t.equal(hits.results[0]?.id, fixtures[1].expected.alpha.searches['keyword:INV-2024-1042']![0], 'an identifier is found first')
})

t.test('a layout this build does not know (a newer release) is refused, and left as it was', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-mem-next-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const db = openMemoryDb(dir, 'fsync')
  await db.meta.put('layout', MEMORY_LAYOUT + 1)
  await db.root.close()
  const before = await readFile(join(dir, 'memory', 'lmdb', 'data.mdb'))
  const err = await openStore(dir, []).catch((e: unknown) => e)
  t.type(err, MemoryLayoutError)
  t.match((err as Error).message, `has layout ${MEMORY_LAYOUT + 1}; this build reads layout ${MEMORY_LAYOUT} and upgrades layouts 1 and 2`)
  t.ok(before.equals(await readFile(join(dir, 'memory', 'lmdb', 'data.mdb'))), 'not a byte changed')
})

t.test('an upgrade from layout 2 that died half-way: the directory opens, and the upgrade finishes', async (t) => {
  const dir = await oldDir(2)
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const { expected } = fixtures[2]
  // As a killed upgrade leaves it: some of alpha's entries written again against the shared structures, no layout mark.
  const db = openMemoryDb(dir, 'fsync')
  const half = [...db.entries.getRange({ start: ['alpha', 0], end: ['alpha', Infinity], limit: 60 })]
  await db.entries.transaction(() => {
    for (const { key, value } of half) void db.entries.put(key, value)
  })
  t.equal(db.meta.get('layout'), 2)
  await db.root.close()
  const logs: any[] = []
  const store = await openStore(dir, logs)
  t.teardown(() => store.close())
  t.match(
    logs.filter((l) => l.msg === 'upgraded the memory store layout'),
    [{ from: 2, to: MEMORY_LAYOUT }],
  )
  for (const tenant of ['alpha', 'beta'] as const) t.same(await listAll(store, tenant), expected[tenant].entries, `${tenant}: every entry`)
})

t.test('entries with metadata of many shapes: each reads back, and entries keep the shared structures', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-mem-shapes-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  let store = await openStore(dir, [])
  const shapes = Array.from({ length: 80 }, (_, i) => ({
    tenant: 'alpha',
    content: `note ${i}`,
    session_id: i % 2 ? `s${i}` : null,
    turn: null,
    seq: null,
    metadata: Object.fromEntries(Array.from({ length: 1 + (i % 4) }, (_, j) => [`key_${i}_${j}`, `v${j}`])),
  }))
  const added = []
  for (const e of shapes) added.push(...(await store.add([e])))
  await store.close()
  store = await openStore(dir, [])
  for (const e of added) t.same(await store.get('alpha', e.id), e)
  // The first 80 entries came with 80 distinct metadata shapes, which took no shared structure: an entry of a new shape (no metadata) still gets one.
  const late = await store.add([{ tenant: 'alpha', content: 'after many shapes', session_id: 's9', turn: 1, seq: 2 }])
  t.same(await store.get('alpha', late[0]!.id), late[0])
  await store.close()
  const db = openMemoryDb(dir, 'fsync')
  t.teardown(() => db.root.close())
  const raw = db.entries.getBinary(['alpha', 80])!
  t.notOk(raw.includes('created_at'), 'an entry after many metadata shapes still holds its values only')
  t.same(db.entries.get(['alpha', 80])?.content, 'after many shapes')
})
