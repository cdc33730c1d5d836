import t from 'tap'
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { BruteForceMemoryStore } from '../../src/memory/brute-force-memory-store.js'
import { HashedEmbedder } from '../../src/memory/hashed-embedder.js'
import { HnswMemoryStore } from '../../src/memory/hnsw-memory-store.js'
import { memoryStoreContract, type MemoryFactory } from '../contract/memory-store.contract.js'

const embedder = new HashedEmbedder()

t.test('memory store contract (brute-force reference)', async (t) =>
  memoryStoreContract(t, async () => ({ store: new BruteForceMemoryStore(embedder), cleanup: async () => {} })),
)

const hnsw: MemoryFactory = async () => {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-mem-'))
  let store = await HnswMemoryStore.open({ dataDir: dir, embedder, durability: 'relaxed' })
  return {
    store,
    reopen: async () => (store = await HnswMemoryStore.open({ dataDir: dir, embedder, durability: 'relaxed' })),
    damageDerived: async () => {
      const indexDir = join(dir, 'memory', 'hnsw')
      const files = (await readdir(indexDir)).filter((f) => f.endsWith('.bin'))
      if (files.length === 0) throw new Error('no index file to damage')
      for (const f of files) await writeFile(join(indexDir, f), Buffer.alloc(4096, 0xa7))
    },
    cleanup: async () => {
      await store.close().catch(() => undefined)
      await rm(dir, { recursive: true, force: true })
    },
  }
}
t.test('memory store contract (HNSW + LMDB)', async (t) => memoryStoreContract(t, hnsw))
