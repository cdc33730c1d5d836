import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LmdbSessionRepository } from '../../src/store/lmdb-session-repository.js'
import { sessionStoreContract, type RepositoryFactory } from '../contract/session-store.contract.js'
import { eventStoreContract } from '../contract/event-store.contract.js'

for (const durability of ['fsync', 'relaxed'] as const) {
  const factory: RepositoryFactory = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'burrow-lmdb-'))
    const open = () => LmdbSessionRepository.open(dir, { durability, idempotencyTtlMs: 24 * 3600 * 1000 })
    let repo = await open()
    return {
      repo,
      reopen: async () => (repo = await open()),
      cleanup: async () => { await repo.close().catch(() => undefined); await rm(dir, { recursive: true, force: true }) },
    }
  }
  t.test(`session store contract (LMDB, ${durability})`, async (t) => sessionStoreContract(t, factory))
  t.test(`event store contract (LMDB, ${durability})`, async (t) => eventStoreContract(t, factory))
}
