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
import { idempotencyKey } from '../../src/session/idempotency.js'
import { entry, memoryStoreContract, type MemoryFactory } from '../contract/memory-store.contract.js'
import { tempDatabase } from '../helpers/pg.js'

const embedder = new HashedEmbedder()
const SESSION = '01900000-0000-7000-8000-0000000000aa'

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

t.test('two local copies on one database, adding at once, converge on the same results as a fresh copy', async (t) => {
  const db = await tempDatabase(t, 'memtwo')
  const dirs = await Promise.all([0, 1, 2].map(() => mkdtemp(join(tmpdir(), 'burrow-pgmem-'))))
  t.teardown(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))))
  const a = await openReplica(db.url, dirs[0]!, 50)
  const b = await openReplica(db.url, dirs[1]!, 50)
  t.teardown(() => Promise.all([a.close(), b.close()]))
  const topics = ['harbour', 'orchard', 'glacier', 'market', 'railway', 'library', 'vineyard', 'lighthouse']
  const text = (i: number) =>
    `Note ${i}: the ${topics[i % topics.length]} survey found ${i % 3 === 0 ? 'cracked' : 'sound'} stonework near gate ${i % 5}.`
  // Both copies in use before the adds, so each sees the other's labels arrive between its own.
  await Promise.all([a.search({ tenant: 'acme', text: 'x', limit: 1 }), b.search({ tenant: 'acme', text: 'x', limit: 1 })])
  const adds = Array.from({ length: 40 }, (_, i) =>
    (i % 2 === 0 ? a : b).add([
      entry(text(i), { session_id: i % 4 === 0 ? SESSION : null, seq: i }),
      entry(text(i + 100), { seq: i + 100 }),
    ]),
  )
  const added = (await Promise.all(adds)).flat()
  t.equal(added.length, 80)
  // Deletions on both sides: one entry by id on A, a session's entries on B.
  t.ok(await a.delete('acme', added[3]!.id))
  t.ok((await b.deleteSession('acme', SESSION)) > 0)
  const queries = ['cracked stonework harbour', 'glacier survey gate 2', 'sound stonework vineyard', 'Note 17', 'railway']
  const results = async (s: ReplicatedMemoryStore) =>
    Promise.all(
      queries.flatMap((text) =>
        (['hybrid', 'vector', 'keyword'] as const).map(async (mode) =>
          (await s.search({ tenant: 'acme', text, limit: 10, mode })).map((h) => [h.entry.id, h.score]),
        ),
      ),
    )
  const c = await openReplica(db.url, dirs[2]!)
  t.teardown(() => c.close())
  // Within a second (the poll), and once every copy's HNSW index holds every entry.
  const t0 = Date.now()
  for (;;) {
    await new Promise((r) => setTimeout(r, 100))
    if (a.indexBacklog() > 0 || b.indexBacklog() > 0 || c.indexBacklog() > 0) continue
    const [ra, rb, rc] = await Promise.all([results(a), results(b), results(c)])
    if (JSON.stringify(ra) === JSON.stringify(rc) && JSON.stringify(rb) === JSON.stringify(rc)) break
    if (Date.now() - t0 > 3000) {
      t.same(ra, rc, 'A ranks as a fresh copy')
      t.same(rb, rc, 'B ranks as a fresh copy')
      break
    }
  }
  t.equal(await a.count('acme'), await c.count('acme'))
  t.pass(`converged in ${Date.now() - t0} ms`)
})

t.test('an idempotent add under a claim another replica took over stores nothing', async (t) => {
  const db = await tempDatabase(t, 'memclaim')
  const [a, b] = await Promise.all(
    ['a', 'b'].map((r) => PgMemoryLog.open({ url: db.url, poolSize: 2, replicaId: `claim-${r}`, withoutLabels, claimMs: 1000 })),
  )
  t.teardown(() => Promise.all([a!.close(), b!.close()]))
  const key = idempotencyKey('acme', null, 'stalled-add')
  const mine = await a!.idempotency.claim(key, 'fp')
  if (mine.kind !== 'claimed') return t.fail('claimed')
  // Replica a stalls: its claim is no longer renewed, expires, and b takes the add over.
  a!.idempotency.completed(key)
  await new Promise((r) => setTimeout(r, 1300))
  t.match(await b!.idempotency.claim(key, 'fp'), { kind: 'claimed' }, 'taken over')
  const e = { id: '01900000-0000-7000-8000-00000000c1a1', tenant: 'acme', content: 'late', session_id: null, turn: null, seq: null }
  const batch = { tenant: 'acme', entries: [{ entry: { ...e, created_at: new Date().toISOString() }, len: 1 }], postings: new Uint8Array() }
  const record = { fingerprint: 'fp', created_at: Date.now(), outcome: { ok: true as const, value: { ids: [e.id] } } }
  await t.rejects(
    a!.append([batch], () => ({ key, record, claim: mine.at })),
    { code: 'STORE_UNAVAILABLE', data: { reason: 'idempotency_claim_lost' } },
  )
  t.equal((await b!.heads(['acme'])).get('acme')?.next ?? 0, 0, 'no entry was stored')
  t.match(await b!.idempotency.claim(key, 'fp'), { kind: 'running' }, "the key is b's still")
})
