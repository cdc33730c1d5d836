// The memory conformance suite against memory on PostgreSQL (ReplicatedMemoryStore over PgMemoryLog),
// each test on a database of its own, dropped after; plus what only a shared store has: two
// stores (two replicas' local copies) on one database, a local copy made again from the database.
import t from 'tap'
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { HashedEmbedder } from '../../src/memory/hashed-embedder.js'
import { withoutLabels } from '../../src/memory/posting-blocks.js'
import { ReplicatedMemoryStore } from '../../src/memory/replicated-memory-store.js'
import { PgMemoryLog } from '../../src/store/pg-memory-log.js'
import { memoryStoreContract, type MemoryFactory } from '../contract/memory-store.contract.js'
import { tempDatabase } from '../helpers/pg.js'

const embedder = new HashedEmbedder()

export async function openReplica(url: string, dir: string, pollMs = 100): Promise<ReplicatedMemoryStore> {
  const log = await PgMemoryLog.open({ url, poolSize: 4, replicaId: 'test', withoutLabels })
  return ReplicatedMemoryStore.open({ dataDir: dir, embedder, log, pollMs })
}

const pgFactory: MemoryFactory = async () => {
  const db = await tempDatabase(undefined, 'mem')
  const dir = await mkdtemp(join(tmpdir(), 'burrow-pgmem-'))
  let store = await openReplica(db.url, dir)
  return {
    store,
    reopen: async () => (store = await openReplica(db.url, dir)),
    damageDerived: async () => {
      const indexDir = join(dir, 'memory', 'hnsw')
      const files = (await readdir(indexDir)).filter((f) => f.endsWith('.bin'))
      if (files.length === 0) throw new Error('no index file to damage')
      for (const f of files) await writeFile(join(indexDir, f), Buffer.alloc(4096, 0xa7))
    },
    cleanup: async () => {
      await store.close().catch(() => undefined)
      await rm(dir, { recursive: true, force: true })
      await db.drop()
    },
  }
}

t.test('memory store contract (PostgreSQL + local copy)', async (t) => memoryStoreContract(t, pgFactory))
