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
t.test('idempotency store contract (PostgreSQL)', async (t) => idempotencyStoreContract(t, postgres, { shared: true }))
