// The indexer that stores what compaction discards, against a real HNSW store.
import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { HashedEmbedder } from '../../src/memory/hashed-embedder.js'
import { HnswMemoryStore } from '../../src/memory/hnsw-memory-store.js'
import { splitPassages } from '../../src/memory/passages.js'
import { MemoryIndexer } from '../../src/session/memory-indexer.js'

const S1 = '01900000-0000-7000-8000-0000000000b1'
const S2 = '01900000-0000-7000-8000-0000000000b2'

t.test("a batch of a session deleted before it was indexed is dropped quietly, and the session's memories stay gone", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-indexer-'))
  const store = await HnswMemoryStore.open({ dataDir: dir, embedder: new HashedEmbedder(), durability: 'relaxed' })
  t.teardown(async () => {
    await store.close()
    await rm(dir, { recursive: true, force: true })
  })
  const logs: any[] = []
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l.trim()) logs.push(JSON.parse(l))
      cb()
    },
  })
  const recorded: Array<[string, number]> = []
  const indexer = new MemoryIndexer(store, (text) => splitPassages(text), pino({ level: 'debug' }, sink))
  indexer.onIndexed(async (_tenant, id, n) => {
    recorded.push([id, n])
  })
  const batch = (sessionId: string, text: string) => ({
    tenant: 'acme',
    sessionId,
    messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text }] }],
    seqs: [3],
    turns: [1],
  })

  indexer.enqueue(batch(S1, 'The ferry to the island leaves at seven.'))
  await indexer.idle()
  t.equal(await store.deleteSession('acme', S1), 1)
  // Compaction discarded more of S1 before the deletion; the batch is worked after it.
  indexer.enqueue(batch(S1, 'The island has one bakery, open until noon.'))
  indexer.enqueue(batch(S2, 'Session two talks about the lighthouse.'))
  await indexer.idle()
  t.equal(await store.count('acme'), 1, "only S2's passage")
  t.same(
    (await store.search({ tenant: 'acme', text: 'island bakery ferry', limit: 5 })).map((h) => h.entry.session_id),
    [S2],
  )
  t.same(
    recorded,
    [
      [S1, 1],
      [S2, 1],
    ],
    'memory_indexed only for what was stored',
  )
  t.same(
    logs.filter((l) => l.level >= 40),
    [],
    'no warning or error',
  )
  t.match(
    logs.find((l) => l.msg === 'session deleted before its discarded messages were indexed'),
    { level: 20, session_id: S1 },
  )
})
