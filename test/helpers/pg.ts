// Databases of their own for the PostgreSQL tests, on the server at 127.0.0.1:5432 (trust auth, user
// postgres; BURROW_TEST_PG_URL names another): each test creates one and drops it when it ends.
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import type { Test } from 'tap'

export const PG_ADMIN_URL = process.env.BURROW_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

/** Runs one statement on the admin database. */
export async function adminQuery(text: string, values: unknown[] = []): Promise<pg.QueryResult> {
  const c = new pg.Client({ connectionString: PG_ADMIN_URL })
  c.on('error', () => undefined)
  await c.connect()
  try {
    return await c.query(text, values)
  } finally {
    await c.end()
  }
}

/** The URL of database `name` on the test server. */
export function dbUrl(name: string): string {
  const u = new URL(PG_ADMIN_URL)
  u.pathname = `/${name}`
  return u.href
}

export interface TempDatabase {
  name: string
  url: string
  drop(): Promise<void>
}

/**
 * A fresh, empty database (`burrow_test_<prefix>_<pid>_…`), dropped (its connections cut) at `t`'s
 * teardown when given; one left by a test process that was killed is dropped by leftovers.ts.
 */
export async function tempDatabase(t: Test | undefined, prefix: string): Promise<TempDatabase> {
  const name = `burrow_test_${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`
  await adminQuery(`CREATE DATABASE ${name}`)
  let dropped: Promise<void> | null = null
  const drop = () => (dropped ??= adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).then(() => undefined))
  t?.teardown(drop)
  return { name, url: dbUrl(name), drop }
}

/** Terminates every connection to `name` but this one (a backend crash or an operator's kill, as clients see it). */
export async function terminateBackends(name: string): Promise<number> {
  const r = await adminQuery(
    'SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
    [name],
  )
  return Number(r.rows[0].n)
}
