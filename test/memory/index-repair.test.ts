// The HNSW store repairs its index instead of failing: a save on a full disk, a vector of
// the wrong length, a missing or damaged file — each is logged and mended while
// every call answers, and searches meanwhile scan exactly what the index lacks.
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync, readdirSync, rmSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import type { Embedder, NewMemoryEntry } from '../../src/core/memory-store.js'
import { BruteForceMemoryStore } from '../../src/memory/brute-force-memory-store.js'
import { HashedEmbedder } from '../../src/memory/hashed-embedder.js'
import { HnswMemoryStore, type HnswMemoryOptions } from '../../src/memory/hnsw-memory-store.js'
import { inspectIndexFile } from '../../src/memory/index-file.js'
import { eventually } from '../helpers/harness.js'

const embedder = new HashedEmbedder()
const entry = (content: string): NewMemoryEntry => ({ tenant: 'acme', content, session_id: null, turn: null, seq: null })
const TOPICS = [
  'invoices',
  'deployments',
  'the garden',
  'travel plans',
  'the printer',
  'budgets',
  'recipes',
  'the boat',
  'hiring',
  'the roof',
]
const corpus = (n: number) =>
  Array.from(
    { length: n },
    (_, i) =>
      `Note ${i} on ${TOPICS[i % TOPICS.length]}: item ${(i * 7919) % 1000} was ${['checked', 'moved', 'paid', 'fixed'][i % 4]} by ${['Ana', 'Bo', 'Cy', 'Di', 'Ed'][i % 5]}.`,
  )

/** A store on `dir` whose log lines land, parsed, in `logs`. */
async function openStore(dir: string, logs: any[], extra: Partial<HnswMemoryOptions> = {}): Promise<HnswMemoryStore> {
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l.trim()) logs.push(JSON.parse(l))
      cb()
    },
  })
  return HnswMemoryStore.open({ dataDir: dir, embedder, durability: 'relaxed', logger: pino({ level: 'debug' }, sink), ...extra })
}

const indexFiles = (dir: string) => readdirSync(join(dir, 'memory', 'hnsw'))

const isRoot = process.getuid?.() === 0
const canMount =
  isRoot &&
  (() => {
    try {
      execFileSync('mount', ['--version'], { stdio: 'ignore' })
      return true
    } catch {
      return false
    }
  })()

t.test(
  'an index save on a full disk is logged and tried again later; the adds answer normally',
  { skip: !canMount && 'needs root to mount a tmpfs' },
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'burrow-index-full-'))
    const hnswDir = join(dir, 'memory', 'hnsw')
    mkdirSync(hnswDir, { recursive: true })
    // Only the index directory is small: LMDB writes go on, the index file does not fit.
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', hnswDir])
    let store: HnswMemoryStore | undefined
    t.teardown(async () => {
      await store?.close().catch(() => undefined)
      try {
        execFileSync('umount', [hnswDir])
      } catch {
        /* not mounted */
      }
      await rm(dir, { recursive: true, force: true })
    })
    const logs: any[] = []
    store = await openStore(dir, logs, { saveEvery: 50 })
    const texts = corpus(200)
    for (let i = 0; i < 80; i += 40) t.equal((await store.add(texts.slice(i, i + 40).map(entry))).length, 40, 'the add answers')
    const failed = await eventually(() =>
      logs.find((l) => l.msg === 'saving a memory index failed; it is saved again later (LMDB has every entry)'),
    )
    t.match(failed, { level: 40, err: { message: /writing the memory index file \w+\.80\.bin failed: .*\(disk full\?\)/ } })
    t.same(indexFiles(dir), [], 'no short file (or temp file) is left behind')
    t.match(
      (await store.search({ tenant: 'acme', text: texts[17]!, limit: 1, mode: 'vector' }))[0]?.entry.content,
      texts[17],
      'searches work',
    )

    execFileSync('mount', ['-o', 'remount,size=16m', hnswDir])
    for (let i = 80; i < 140; i += 30) await store.add(texts.slice(i, i + 30).map(entry))
    const saved = await eventually(() => indexFiles(dir).find((f) => f.endsWith('.140.bin')) ?? '')
    t.equal(
      inspectIndexFile(join(hnswDir, saved), { dim: embedder.dimensions, labelsBelow: 140 }).elements,
      140,
      'with room, the next save after another 50 changes is whole',
    )
    await store.close()
    logs.length = 0
    store = await openStore(dir, logs)
    t.match((await store.search({ tenant: 'acme', text: texts[120]!, limit: 1, mode: 'vector' }))[0]?.entry.content, texts[120])
    t.same(
      logs.filter((l) => l.level >= 40),
      [],
      'and it loads without a warning',
    )
  },
)

t.test(
  'a vector of the wrong length from the embedder is skipped with a warning, not a failure — when adding and when rebuilding',
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'burrow-index-badvec-'))
    t.teardown(() => rm(dir, { recursive: true, force: true }))
    const logs: any[] = []
    // An embedder endpoint that answers one text with a short vector (the store takes any Embedder).
    const flaky: Embedder = {
      id: embedder.id,
      dimensions: embedder.dimensions,
      embed: async (texts) => (await embedder.embed(texts)).map((v, i) => (texts[i]!.includes('item 838 ') ? v.slice(0, 10) : v)),
    }
    let store = await openStore(dir, logs, { embedder: flaky })
    const texts = corpus(6)
    await store.add(texts.map(entry))
    for (const i of [0, 4])
      t.match((await store.search({ tenant: 'acme', text: texts[i]!, limit: 1, mode: 'vector' }))[0]?.entry.content, texts[i])
    await eventually(() => logs.find((l) => /wrong length/.test(l.msg)))
    await store.close()
    // Without the index file, the store embeds every entry again from its content.
    rmSync(join(dir, 'memory', 'hnsw'), { recursive: true })
    logs.length = 0
    store = await openStore(dir, logs, { embedder: flaky })
    t.teardown(() => store.close())
    t.match(
      (await store.search({ tenant: 'acme', text: texts[4]!, limit: 1 }))[0]?.entry.content,
      texts[4],
      'found while the index is rebuilt',
    )
    await eventually(() => logs.find((l) => l.msg === 'memory index rebuilt from LMDB'))
    t.match(
      (await store.search({ tenant: 'acme', text: texts[2]!, limit: 1, mode: 'keyword' }))[0]?.entry.content,
      texts[2],
      'the entry is still found by its words',
    )
    t.notOk(
      (await store.search({ tenant: 'acme', text: texts[2]!, limit: 6, mode: 'vector' })).some((h) => h.entry.content === texts[2]),
      'but not by a vector it does not have',
    )
    t.match(
      (await store.search({ tenant: 'acme', text: texts[4]!, limit: 1, mode: 'vector' }))[0]?.entry.content,
      texts[4],
      'and the others through the rebuilt index',
    )
    t.match(
      logs.filter((l) => /wrong length/.test(l.msg)),
      [{ level: 40, label: 2 }],
    )
    t.equal((await store.add([entry('One more after the repair.')])).length, 1)
  },
)

t.test(
  'while an index is rebuilt in the background, searches answer at once — by keywords what is not embedded again yet, exactly what is',
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'burrow-index-tail-'))
    t.teardown(() => rm(dir, { recursive: true, force: true }))
    const logs: any[] = []
    let store = await openStore(dir, logs)
    const reference = new BruteForceMemoryStore(embedder)
    const texts = corpus(800)
    for (let i = 0; i < texts.length; i += 200) {
      await store.add(texts.slice(i, i + 200).map(entry))
      await reference.add(texts.slice(i, i + 200).map(entry))
    }
    await store.close()
    rmSync(join(dir, 'memory', 'hnsw'), { recursive: true })
    store = await openStore(dir, logs)
    t.teardown(() => store.close())
    const queries = ['who fixed the printer', 'paid invoices by Bo', 'travel plans moved', 'the roof item 301', 'recipes checked by Ed']
    const top = async (s: { search: HnswMemoryStore['search'] }, q: string) =>
      (await s.search({ tenant: 'acme', text: q, limit: 5, mode: 'vector' })).map((h) => h.entry.content)
    for (const [i, q] of queries.entries()) {
      const hits = await store.search({ tenant: 'acme', text: q, limit: 5 })
      t.equal(hits.length, 5, `hybrid search answers while rebuilding: ${q}`)
      // What has no vector yet is still found by its words (the keyword index does not wait for vectors).
      t.ok(
        (await store.search({ tenant: 'acme', text: texts[700 + i]!, limit: 2, mode: 'keyword' })).some(
          (h) => h.entry.content === texts[700 + i],
        ),
        `found by its words: ${texts[700 + i]}`,
      )
    }
    t.ok(store.indexCovered('acme') < texts.length, 'the rebuild does not hold the first search: it goes on in the background')
    // Just-added entries are found by their vectors at once, before the rebuild reaches them.
    await store.add([entry('A brand new note about the lighthouse keeper.')])
    t.match(
      (await store.search({ tenant: 'acme', text: 'brand new note about the lighthouse keeper', limit: 1, mode: 'vector' }))[0]?.entry
        .content,
      /lighthouse/,
    )
    await reference.add([entry('A brand new note about the lighthouse keeper.')])
    await eventually(() => logs.find((l) => l.msg === 'memory index rebuilt from LMDB' && l.labels === texts.length + 1), 30_000)
    for (const q of queries) t.same((await top(store, q))[0], (await top(reference, q))[0], `through the rebuilt index: ${q}`)
    t.ok(await eventually(() => indexFiles(dir).some((f) => f.endsWith('.801.bin'))), 'and the fresh index is saved once complete')
  },
)
