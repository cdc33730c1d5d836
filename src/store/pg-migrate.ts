import type pg from 'pg'
import { MIGRATIONS, SCHEMA_VERSION, type Migration } from './pg-schema.js'

/**
 * The advisory lock every migrator takes (transaction-scoped): "Burrow" in ASCII. Replicas that
 * start together queue on it, so exactly one applies a version and the others find it applied.
 */
export const MIGRATION_LOCK = 0x42_75_72_72_6f_77

/** The database was written by a newer Burrow: this code cannot know its schema. */
export class SchemaTooNewError extends Error {
  constructor(
    readonly found: number,
    readonly known: number,
  ) {
    super(`the database has schema version ${found}, newer than this Burrow knows (${known})`)
    this.name = 'SchemaTooNewError'
  }
}

/** What a migration run found and did. */
export interface Migrated {
  from: number
  to: number
  applied: number[]
}

/**
 * Brings the schema to SCHEMA_VERSION in one transaction holding MIGRATION_LOCK: every pending
 * migration applies, or none does. Refuses (SchemaTooNewError, nothing changed) a database whose
 * version is newer than this code's. `migrations` is for tests; the service applies MIGRATIONS.
 */
export async function migrate(pool: pg.Pool, migrations: readonly Migration[] = MIGRATIONS): Promise<Migrated> {
  const latest = migrations.length > 0 ? migrations[migrations.length - 1]!.version : 0
  const client = await pool.connect()
  // A checked-out client has no error listener of the pool's: a connection lost meanwhile must not crash the process.
  const onError = () => undefined
  client.on('error', onError)
  let broken: unknown
  try {
    await client.query('BEGIN')
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
    await client.query(
      `CREATE TABLE IF NOT EXISTS schema_version (
         version integer PRIMARY KEY, description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    )
    const found = Number((await client.query('SELECT coalesce(max(version), 0) AS v FROM schema_version')).rows[0].v)
    if (found > latest) throw new SchemaTooNewError(found, latest)
    const applied: number[] = []
    for (const m of migrations) {
      if (m.version <= found) continue
      await client.query(m.sql)
      await m.after?.(client)
      await client.query('INSERT INTO schema_version (version, description) VALUES ($1, $2)', [m.version, m.description])
      applied.push(m.version)
    }
    await client.query('COMMIT')
    return { from: found, to: Math.max(found, latest), applied }
  } catch (err) {
    broken = err
    await client.query('ROLLBACK').catch(() => undefined)
    throw err
  } finally {
    client.removeListener('error', onError)
    client.release(broken instanceof SchemaTooNewError ? undefined : (broken as Error | undefined))
  }
}

export { SCHEMA_VERSION }
