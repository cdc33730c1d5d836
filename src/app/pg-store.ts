import type { Logger } from '../core/logger.js'
import { IDEMPOTENCY_TTL_MS } from '../session/idempotency.js'
import type { PgSessionRepository } from '../store/pg-session-repository.js'
import type { Config } from './config.js'
import { optional } from './optional-dependency.js'
import { StartupError } from './startup-error.js'

/** A PostgreSQL URL as it may be logged: host, port and database, never the user's password. */
export function describeDatabase(url: string): string {
  try {
    const u = new URL(url)
    return `${u.hostname}:${u.port || '5432'}${u.pathname}`
  } catch {
    return '(unparsable URL)'
  }
}

/**
 * Opens the PostgreSQL session store (BURROW_SESSION_STORE=postgres): connects, applies pending
 * migrations under the migration lock, and fails start-up clearly — exit 78 — when the driver is
 * not installed, the database cannot be reached, or its schema is newer than this code's.
 */
export async function openPgSessionStore(config: Config, logger: Logger): Promise<PgSessionRepository> {
  const [{ PgSessionRepository }, { SchemaTooNewError }] = await optional(
    () => Promise.all([import('../store/pg-session-repository.js'), import('../store/pg-migrate.js')]),
    'pg',
    'BURROW_SESSION_STORE=postgres',
  )
  const url = config.databaseUrl!
  const database = describeDatabase(url)
  let repository: PgSessionRepository
  try {
    repository = await PgSessionRepository.open({
      url,
      poolSize: config.pgPoolSize,
      replicaId: config.replicaId,
      leaseMs: config.leaseMs,
      idempotencyTtlMs: IDEMPOTENCY_TTL_MS,
      onHealth: (writable, err) => {
        if (writable) logger.info({ database }, 'the session database takes writes again: ready')
        else
          logger.error(
            { err, database },
            'the session database cannot be reached or cannot write: requests that need it fail with STORE_UNAVAILABLE, /readyz answers 503 until a probe write succeeds',
          )
      },
    })
  } catch (err) {
    if (err instanceof SchemaTooNewError)
      throw new StartupError(
        `The database ${database} has schema version ${err.found}, newer than this Burrow knows (${err.known}): it was written by a newer release. Run that release (or a newer one), or set BURROW_DATABASE_URL to another database.`,
      )
    throw new StartupError(`Cannot open the session database ${database}: ${(err as Error).message}`, { cause: err })
  }
  const { from, to, applied } = repository.migrated
  if (applied.length > 0) logger.info({ database, from, to, applied }, `migrated the session database from schema ${from} to ${to}`)
  return repository
}
