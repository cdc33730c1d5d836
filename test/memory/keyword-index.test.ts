// The in-memory keyword index against the reference BM25 (bm25() over plain maps, and over the
// entries in LMDB, tokenised again): same scores, same order, same ties — kept current in place
// and built from the posting blocks alike.
import t from 'tap'
import fc from 'fast-check'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { bm25, termFrequencies, type KeywordSource } from '../../src/memory/bm25.js'
import { HashedEmbedder } from '../../src/memory/hashed-embedder.js'
import { HnswMemoryStore } from '../../src/memory/hnsw-memory-store.js'
import { buildKeywordIndex } from '../../src/memory/keyword-build.js'
import { decodeBlock } from '../../src/memory/posting-blocks.js'
import { KeywordIndex } from '../../src/memory/keyword-index.js'
import { TopK } from '../../src/memory/top-k.js'
import type { MemoryDb } from '../../src/memory/memory-db.js'
import { exactMatches } from '../../src/memory/memory-ranking.js'
import { tokenize } from '../../src/memory/text-features.js'
import { rounds } from '../helpers/thoroughness.js'

/** The reference: a document map, postings iterated in label order. */
function mapSource(docs: Map<number, Map<string, number>>): KeywordSource {
  const labels = [...docs.keys()].sort((a, b) => a - b)
  const len = (l: number) => [...docs.get(l)!.values()].reduce((a, n) => a + n, 0)
  return {
    stats: () => ({ docs: docs.size, totalLength: labels.reduce((a, l) => a + len(l), 0) }),
    postings: (term) => labels.filter((l) => docs.get(l)!.has(term)).map((label) => ({ label, tf: docs.get(label)!.get(term)! })),
    length: (l) => (docs.has(l) ? len(l) : 0),
  }
}

/** The truth: the tenant's live entries in LMDB, each tokenised again (what the postings are made from). */
function lmdbSource(db: MemoryDb, tenant: string): KeywordSource {
  const docs = new Map<number, Map<string, number>>()
  for (const { key, value } of db.entries.getRange({ start: [tenant, 0], end: [tenant, Infinity] }))
    docs.set(key[1] as number, termFrequencies(tokenize(value.content)))
  const stats = db.stats.get(tenant) ?? { docs: 0, totalLength: 0, next: 0 }
  const source = mapSource(docs)
  if (JSON.stringify(source.stats()) !== JSON.stringify({ docs: stats.docs, totalLength: stats.totalLength }))
    throw new Error('stored stats disagree with the entries')
  return source
}

const VOCAB = ['alpha', 'beta', 'gamma', 'delta', 'eps', 'zeta', 'eta', 'theta', 'iota', 'kappa', 'x1', 'x2']
const doc = fc.array(fc.constantFrom(...VOCAB), { minLength: 0, maxLength: 12 })
const query = fc.array(fc.constantFrom(...VOCAB, 'absent'), { minLength: 1, maxLength: 5 })

t.test('top() equals bm25() on random corpora, with deletions, filters and small limits', async (t) => {
  const runs = rounds(100, 300)
  let nonEmpty = 0
  let cut = 0
  fc.assert(
    fc.property(
      fc.array(doc, { minLength: 1, maxLength: 60 }),
      fc.array(fc.boolean(), { maxLength: 60 }),
      fc.array(query, { minLength: 1, maxLength: 6 }),
      fc.integer({ min: 1, max: 20 }),
      fc.integer({ min: 2, max: 5 }),
      (texts, dels, queries, limit, mod) => {
        const ix = new KeywordIndex()
        const docs = new Map<number, Map<string, number>>()
        texts.forEach((words, label) => {
          const tf = termFrequencies(words)
          if (!ix.add(label, tf)) throw new Error('in-order add refused')
          docs.set(label, tf)
        })
        texts.forEach((words, label) => {
          if (!dels[label]) return
          if (!ix.remove(label, new Set(words))) throw new Error('remove refused')
          docs.delete(label)
        })
        const ref = mapSource(docs)
        if (JSON.stringify(ix.stats()) !== JSON.stringify(ref.stats())) return false
        for (const q of queries) {
          const expected = bm25(ref, q, limit)
          const got = ix.top(q, limit)
          if (expected.length > 0) nonEmpty++
          if (expected.length === limit) cut++
          if (JSON.stringify(got) !== JSON.stringify(expected)) return false
          const accept = (l: number) => l % mod === 0
          if (JSON.stringify(ix.top(q, limit, accept)) !== JSON.stringify(bm25(ref, q, limit, accept))) return false
        }
        return true
      },
    ),
    { numRuns: runs },
  )
  // The share of meaningful cases is the property's, whatever the number of runs (100 and 20 of 300 at full count).
  t.ok(nonEmpty > runs / 3, `queries with hits were compared (${nonEmpty})`)
  t.ok(cut > runs / 15, `queries whose candidates exceed the limit were compared (${cut})`)
})

t.test('top() equals bm25() on larger skewed corpora: MaxScore pruning, deletions, filters, limits 1..60', async (t) => {
  const runs = rounds(50, 150)
  // Zipf-like term frequencies (a few terms in most documents, many rare ones), documents of
  // 1–40 tokens with repeated terms: the rare terms' bounds lift the floor early and the
  // common terms' postings are pruned — every such cut must leave the result as bm25()'s.
  const vocab = Array.from({ length: 80 }, (_, i) => `w${i}`)
  const zipf = (r: () => number) => vocab[Math.min(vocab.length - 1, Math.floor(vocab.length * r() ** 3))]!
  let compared = 0
  let cut = 0
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 2 ** 31 - 1 }),
      fc.integer({ min: 50, max: 1500 }),
      fc.integer({ min: 1, max: 60 }),
      (seed, n, limit) => {
        let x = seed
        const r = () => {
          x = (Math.imul(x, 1103515245) + 12345) >>> 0
          return x / 2 ** 32
        }
        const ix = new KeywordIndex()
        const docs = new Map<number, Map<string, number>>()
        for (let label = 0; label < n; label++) {
          const tf = termFrequencies(Array.from({ length: 1 + Math.floor(r() * 40) }, () => zipf(r)))
          if (!ix.add(label, tf)) throw new Error('in-order add refused')
          docs.set(label, tf)
        }
        // Deletions: a random share of the documents (some lists get compacted, others keep dead slots).
        const share = r() * 0.6
        for (const [label, tf] of [...docs]) {
          if (r() >= share) continue
          if (!ix.remove(label, tf.keys())) throw new Error('remove refused')
          docs.delete(label)
        }
        const ref = mapSource(docs)
        for (let q = 0; q < 6; q++) {
          const terms = Array.from({ length: 1 + Math.floor(r() * 6) }, () => (r() < 0.1 ? 'absent' : zipf(r)))
          if (r() < 0.3) terms.push(terms[0]!) // a repeated word counts once
          const expected = bm25(ref, terms, limit)
          if (expected.length > 0) compared++
          if (bm25(ref, terms, limit + 1).length > limit) cut++
          if (JSON.stringify(ix.top(terms, limit)) !== JSON.stringify(expected)) return false
          const mod = 2 + Math.floor(r() * 4)
          const accept = (l: number) => l % mod !== 1
          if (JSON.stringify(ix.top(terms, limit, accept)) !== JSON.stringify(bm25(ref, terms, limit, accept))) return false
        }
        return true
      },
    ),
    { numRuns: runs },
  )
  // As many per run as at the full count (500 and 300 over 150 runs).
  t.ok(compared > (runs * 10) / 3, `queries with hits were compared (${compared})`)
  t.ok(cut > runs * 2, `queries with more candidates than the limit were compared (${cut})`)
})

t.test('top() equals bm25() while documents arrive between searches, past the size of the per-document bound table', async (t) => {
  const runs = rounds(20, 60)
  // Each search sees another average length and another longest document, so the per-document
  // bounds (by length and tf level) are computed afresh; a document longer than the bound table
  // allows switches them off and the lists' own bounds must do.
  const vocab = Array.from({ length: 30 }, (_, i) => `v${i}`)
  let compared = 0
  let withoutTable = 0
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 2 ** 31 - 1 }), fc.integer({ min: 1, max: 40 }), (seed, limit) => {
      let x = seed
      const r = () => {
        x = (Math.imul(x, 1103515245) + 12345) >>> 0
        return x / 2 ** 32
      }
      const word = () => vocab[Math.floor(vocab.length * r() ** 2)]!
      const ix = new KeywordIndex()
      const docs = new Map<number, Map<string, number>>()
      const long = Math.floor(r() * 300)
      for (let label = 0; label < 300; label++) {
        // Mostly short messages, some repeating one word up to 5 times; one of 3,000 tokens.
        const words = Array.from({ length: label === long ? 3000 : 1 + Math.floor(r() * 25) }, word)
        if (r() < 0.2) words.push(...Array.from({ length: 1 + Math.floor(r() * 4) }, () => words[0]!))
        const tf = termFrequencies(words)
        if (!ix.add(label, tf)) throw new Error('in-order add refused')
        docs.set(label, tf)
        if (label % 7 !== 6) continue
        const ref = mapSource(docs)
        for (let q = 0; q < 3; q++) {
          const terms = Array.from({ length: 1 + Math.floor(r() * 5) }, word)
          const expected = bm25(ref, terms, limit)
          if (expected.length > 0) compared++
          if (label >= long) withoutTable++
          if (JSON.stringify(ix.top(terms, limit)) !== JSON.stringify(expected)) return false
        }
      }
      return true
    }),
    { numRuns: runs },
  )
  // As many per run as at the full count (2000 and 500 over 60 runs).
  t.ok(compared > (runs * 100) / 3, `searches with hits were compared (${compared})`)
  t.ok(withoutTable > (runs * 25) / 3, `searches after the long document were compared (${withoutTable})`)
})

t.test('TopK keeps the best k by score, ties by label, like a full sort', async (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.nat(1000), fc.integer({ min: 0, max: 5 })), { maxLength: 200 }),
      fc.integer({ min: 1, max: 30 }),
      (pairs, k) => {
        const uniq = [...new Map(pairs.map(([l, s]) => [l, s / 2])).entries()].map(([label, score]) => ({ label, score }))
        const heap = new TopK(k)
        for (const p of uniq) heap.offer(p.label, p.score)
        const expected = [...uniq].sort((a, b) => b.score - a.score || a.label - b.label).slice(0, k)
        return JSON.stringify(heap.sorted()) === JSON.stringify(expected)
      },
    ),
    { numRuns: rounds(100, 300) },
  )
  t.pass('300 random cases')
})

t.test('add() refuses a label out of order; remove() one not covered', async (t) => {
  const ix = new KeywordIndex()
  t.ok(ix.add(0, new Map([['a', 1]])))
  t.notOk(ix.add(2, new Map([['a', 1]])), 'a gap: a change was missed')
  t.ok(ix.add(0, new Map([['a', 1]])), 'already covered: skipped')
  t.same(ix.stats(), { docs: 1, totalLength: 1 })
  t.notOk(ix.remove(5, ['a']))
  t.ok(ix.remove(0, ['a']))
  t.ok(ix.remove(0, ['a']), 'removing twice is a no-op')
  t.same(ix.stats(), { docs: 0, totalLength: 0 })
  t.same([...ix.postings('a')], [])
})

const embedder = new HashedEmbedder()
const WORDS = [
  'invoice',
  'deploy',
  'rollback',
  'Helga',
  'refund',
  'INV-2024-0042',
  'v2.3.1',
  'cache',
  'latency',
  'customer',
  'export',
  '数据库',
  'ünïcode',
  '🚀launch',
]

t.test(
  'store: adds, session deletions and entry deletions keep the in-memory index equal to a rebuild from LMDB, and search equal to the LMDB reference',
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'burrow-kw-'))
    t.teardown(() => rm(dir, { recursive: true, force: true }))
    const store = await HnswMemoryStore.open({ dataDir: dir, embedder, durability: 'relaxed' })
    t.teardown(() => store.close())
    const db = (store as unknown as { db: MemoryDb }).db
    t.ok(db && typeof db.blocks.getRange === 'function', 'the store keeps its LMDB handles in `db`')
    const tenants = ['t', 'tt', 'other']
    let seed = 1
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed % n
    }
    const text = () => Array.from({ length: 1 + rnd(8) }, () => WORDS[rnd(WORDS.length)]).join(' ')
    let compared = 0
    const kept = new Map<string, KeywordIndex>()
    for (let round = 0; round < 12; round++) {
      // Concurrent adds, two to each tenant, in sessions.
      const added = await Promise.all(
        [...tenants, ...tenants].map((tenant) =>
          store.add(
            Array.from({ length: 5 + rnd(20) }, () => ({
              tenant,
              content: text(),
              session_id: `s${round}-${rnd(3)}`,
              turn: null,
              seq: null,
            })),
          ),
        ),
      )
      // Single entries deleted by id too (the management API's path).
      if (round % 3 === 2) for (const batch of added) t.equal(await store.delete(batch[0]!.tenant, batch[rnd(batch.length)]!.id), true)
      if (round === 2) for (const tenant of tenants) kept.set(tenant, store.keywordIndex(tenant)) // loaded from here on: kept current
      if (round % 3 === 1) await Promise.all(tenants.map((tenant) => store.deleteSession(tenant, `s${round - 1}-${rnd(3)}`)))
      if (round < 2) continue
      for (const tenant of tenants) {
        const live = store.keywordIndex(tenant)
        t.equal(live, kept.get(tenant), `round ${round}: the same index, updated in place (not dropped and rebuilt)`)
        const rebuilt = buildKeywordIndex(db, tenant)
        const ref = lmdbSource(db, tenant)
        t.same(live.stats(), ref.stats(), `round ${round}: stats as in LMDB`)
        t.same(rebuilt.stats(), ref.stats())
        for (const term of new Set(WORDS.flatMap((w) => tokenize(w)))) {
          const refPostings = [...ref.postings(term)]
          if (JSON.stringify([...live.postings(term)]) !== JSON.stringify(refPostings)) t.fail(`round ${round}: postings of ${term}`)
          if (JSON.stringify([...rebuilt.postings(term)]) !== JSON.stringify(refPostings))
            t.fail(`round ${round}: rebuilt postings of ${term}`)
          for (const p of refPostings) if (live.length(p.label) !== ref.length(p.label)) t.fail(`length of ${p.label}`)
        }
        for (let i = 0; i < 5; i++) {
          const q = Array.from({ length: 1 + rnd(4) }, () => WORDS[rnd(WORDS.length)]).join(' ')
          const expected = bm25(ref, tokenize(q), 7)
          t.same(live.top(tokenize(q), 7), expected, `round ${round}: top() as bm25() over LMDB`)
          t.same(exactMatches(live, q), exactMatches(ref, q))
          const hits = await store.search({ tenant, text: q, limit: 7, mode: 'keyword' })
          t.same(
            hits.map((h) => h.entry.content),
            expected.map((r) => db.entries.get([tenant, r.label])!.content),
          )
          const sid = `s${round}-0`
          const inSession = new Set(
            [...db.bySession.getKeys({ start: [tenant, sid, 0], end: [tenant, sid, Infinity] })].map((k) => k[2] as number),
          )
          const sessionHits = await store.search({ tenant, text: q, limit: 7, mode: 'keyword', sessionId: sid })
          t.same(
            sessionHits.map((h) => h.entry.id),
            bm25(ref, tokenize(q), 7, (l) => inSession.has(l)).map((r) => db.entries.get([tenant, r.label])!.id),
            'session scope',
          )
          t.ok(sessionHits.every((h) => h.entry.session_id === sid))
          if (expected.length > 0) compared++
        }
      }
    }
    t.ok(compared > 50, `searches with hits compared (${compared})`)
    for (const tenant of tenants) {
      const inBlocks: number[] = []
      for (const { key, value } of db.blocks.getRange({ start: [tenant, 0], end: [tenant, Infinity] }))
        decodeBlock(key[1] as number, value, (label) => inBlocks.push(label))
      const live = [...db.entries.getKeys({ start: [tenant, 0], end: [tenant, Infinity] })].map((k) => k[1] as number)
      t.same(inBlocks, live, `${tenant}: the posting blocks hold exactly the live entries (a deleted entry's words leave the disk)`)
      t.ok(live.length < (db.stats.get(tenant)?.next ?? 0), 'some were deleted')
    }
  },
)
