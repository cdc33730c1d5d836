// The session-store and event-store conformance suites against PostgreSQL, each test on a database of its own.
import t from 'tap'
import { PgSessionRepository } from '../../src/store/pg-session-repository.js'
import { eventStoreContract } from '../contract/event-store.contract.js'
import { sessionStoreContract, type RepositoryFactory } from '../contract/session-store.contract.js'
import { tempDatabase } from '../helpers/pg.js'

export const openPg = (url: string, ttlMs = 24 * 3600 * 1000) =>
  PgSessionRepository.open({ url, poolSize: 4, replicaId: 'test', idempotencyTtlMs: ttlMs })

const factory: RepositoryFactory = async () => {
  const db = await tempDatabase(undefined, 'repo')
  let repo = await openPg(db.url)
  return {
    repo,
    reopen: async () => (repo = await openPg(db.url)),
    cleanup: async () => {
      await repo.close().catch(() => undefined)
      await db.drop()
    },
  }
}

t.test('session store contract (PostgreSQL)', async (t) => sessionStoreContract(t, factory))
t.test('event store contract (PostgreSQL)', async (t) => eventStoreContract(t, factory))
