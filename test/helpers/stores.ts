// The two durable session stores, for tests that run the same steps on each: LMDB (relaxed
// durability: these tests do not cut power) and PostgreSQL (a database of the test's own).
import type { Test } from 'tap'
import { tempDatabase } from './pg.js'

export type StoreEnv = (t: Test) => Promise<Record<string, string>>

/** `[name, env]` per store; `prefix` names the PostgreSQL test database. */
export function durableStores(prefix: string): Array<[string, StoreEnv]> {
  return [
    ['lmdb', async () => ({ BURROW_SESSION_STORE: 'lmdb', BURROW_DURABILITY: 'relaxed' })],
    [
      'postgres',
      async (t) => ({
        BURROW_SESSION_STORE: 'postgres',
        BURROW_DATABASE_URL: (await tempDatabase(t, prefix)).url,
        BURROW_MEMORY_STORE: 'off',
      }),
    ],
  ]
}
