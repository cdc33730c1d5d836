// The idempotency-store conformance suite against every backend: the in-memory store (ephemeral mode),
// LMDB in a temporary directory, PostgreSQL on a database of its own per test.
import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LmdbSessionRepository } from '../../src/store/lmdb-session-repository.js'
import { MemoryIdempotencyStore } from '../../src/store/memory-idempotency-store.js'
import { PgSessionRepository } from '../../src/store/pg-session-repository.js'
import { idempotencyStoreContract, type IdempotencyStoreFactory } from '../contract/idempotency-store.contract.js'
import { idempotencyCommitContract, type CommitHandle } from '../contract/idempotency-commit.contract.js'
import { MemorySessionRepository } from '../../src/store/memory-session-repository.js'
import { NullSessionRepository } from '../../src/store/null-session-repository.js'
import { cp } from 'node:fs/promises'
import { idempotencyKey } from '../../src/core/idempotency-keys.js'
import { MemoryAddOutcomes } from '../../src/memory/memory-outcomes.js'
import { memoryProbe, openMemoryDb } from '../../src/memory/memory-db.js'
import { WriteHealth } from '../../src/core/write-health.js'
import { tempDatabase } from '../helpers/pg.js'

const memory: IdempotencyStoreFactory = async ({ ttlMs }) => ({ store: new MemoryIdempotencyStore(ttlMs), cleanup: async () => {} })

const lmdb: IdempotencyStoreFactory = async ({ ttlMs }) => {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-idem-'))
  const open = () => LmdbSessionRepository.open(dir, { durability: 'relaxed', idempotencyTtlMs: ttlMs })
  let repo = await open()
  return {
    store: repo.idempotency,
    sweep: () => repo.sweepIdempotency(),
    reopen: async () => {
      await repo.close()
      repo = await open()
      return repo.idempotency
    },
    cleanup: async () => {
      await repo.close().catch(() => undefined)
      await rm(dir, { recursive: true, force: true })
    },
  }
}

// The outcomes of memory adds, kept in the memory store's own LMDB environment.
const memoryOutcomes: IdempotencyStoreFactory = async ({ ttlMs }) => {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-idem-mem-'))
  let db = openMemoryDb(dir, 'relaxed')
  const open = () => new MemoryAddOutcomes(db.idempotency, ttlMs, new WriteHealth(memoryProbe(db)))
  let store = open()
  return {
    store,
    sweep: () => store.sweep(),
    reopen: async () => {
      await db.root.close()
      db = openMemoryDb(dir, 'relaxed')
      store = open()
      return store
    },
    cleanup: async () => {
      await db.root.close().catch(() => undefined)
      await rm(dir, { recursive: true, force: true })
    },
  }
}

const postgres: IdempotencyStoreFactory = async ({ ttlMs, claimMs }) => {
  const db = await tempDatabase(undefined, 'idem')
  // Each repository is a replica of its own: its claims carry its id and are renewed while it runs.
  let n = 0
  const open = () => PgSessionRepository.open({ url: db.url, poolSize: 2, replicaId: `r${n++}`, idempotencyTtlMs: ttlMs, leaseMs: claimMs })
  const opened: PgSessionRepository[] = []
  const repo = await open()
  opened.push(repo)
  return {
    store: repo.idempotency,
    sweep: () => repo.sweepIdempotency(),
    reopen: async () => {
      const again = await open()
      opened.push(again)
      return again.idempotency
    },
    peer: async () => {
      const peer = await open()
      opened.push(peer)
      return { store: peer.idempotency, stop: () => peer.close() }
    },
    cleanup: async () => {
      await Promise.all(opened.map((r) => r.close().catch(() => undefined)))
      await db.drop()
    },
  }
}

t.test('idempotency store contract (in-memory)', async (t) => idempotencyStoreContract(t, memory, { shared: false }))
t.test('idempotency store contract (LMDB)', async (t) => idempotencyStoreContract(t, lmdb, { shared: false }))
t.test('idempotency store contract (memory adds, LMDB)', async (t) => idempotencyStoreContract(t, memoryOutcomes, { shared: false }))
t.test('idempotency store contract (PostgreSQL)', async (t) => idempotencyStoreContract(t, postgres, { shared: true }))

// Outcomes committed with the work, per repository.
const DAY = 24 * 3600 * 1000

t.test('outcomes committed with the work (in-memory)', async (t) =>
  idempotencyCommitContract(t, async () => ({ repo: new MemorySessionRepository(DAY), cleanup: async () => {} })),
)
t.test('outcomes committed with the work (ephemeral)', async (t) =>
  idempotencyCommitContract(t, async () => ({ repo: new NullSessionRepository(DAY), keepsNoLog: true, cleanup: async () => {} })),
)
t.test('outcomes committed with the work (LMDB)', async (t) =>
  idempotencyCommitContract(t, async (): Promise<CommitHandle> => {
    const dir = await mkdtemp(join(tmpdir(), 'burrow-idem-commit-'))
    const open = (d: string) => LmdbSessionRepository.open(d, { durability: 'fsync', idempotencyTtlMs: DAY })
    const repos = [await open(dir)]
    return {
      repo: repos[0]!,
      // The files as a kill -9 leaves them: copied while the first process still has them open, then opened by another.
      crashed: async () => {
        const copy = await mkdtemp(join(tmpdir(), 'burrow-idem-crashed-'))
        await cp(join(dir, 'lmdb'), join(copy, 'lmdb'), { recursive: true })
        repos.push(await open(copy))
        return repos.at(-1)!
      },
      cleanup: async () => {
        await Promise.all(repos.map((r) => r.close().catch(() => undefined)))
        await rm(dir, { recursive: true, force: true })
      },
    }
  }),
)
t.test('outcomes committed with the work (PostgreSQL)', async (t) =>
  idempotencyCommitContract(t, async (): Promise<CommitHandle> => {
    const db = await tempDatabase(undefined, 'idemcommit')
    let n = 0
    const open = () => PgSessionRepository.open({ url: db.url, poolSize: 2, replicaId: `c${n++}`, idempotencyTtlMs: DAY, leaseMs: 1000 })
    const repos = [await open()]
    return {
      repo: repos[0]!,
      crashed: async () => {
        repos.push(await open())
        return repos.at(-1)!
      },
      peer: async () => {
        repos.push(await open())
        return repos.at(-1)!
      },
      claimMs: 1000,
      cleanup: async () => {
        await Promise.all(repos.map((r) => r.close().catch(() => undefined)))
        await db.drop()
      },
    }
  }),
)

t.test("a replica restarted under its id expires its predecessor's claims at once (PostgreSQL)", async (t) => {
  const db = await tempDatabase(t, 'idemrestart')
  const open = (replicaId: string) =>
    PgSessionRepository.open({ url: db.url, poolSize: 2, replicaId, idempotencyTtlMs: DAY, leaseMs: 60_000 })
  const key = idempotencyKey('acme', null, 'restarted')
  const dead = await open('same')
  t.teardown(() => dead.close())
  t.match(await dead.idempotency.claim(key, 'fp'), { kind: 'claimed' })
  dead.idempotency.close() // it dies: its claims are no longer renewed (a minute's claim would hold on)
  const other = await open('other')
  t.teardown(() => other.close())
  t.match(await other.idempotency.claim(key, 'fp'), { kind: 'running' }, 'held while nobody knows its replica died')
  const restarted = await open('same')
  t.teardown(() => restarted.close())
  t.match(await other.idempotency.claim(key, 'fp'), { kind: 'claimed' }, 'free once its replica came back under its id')
})
