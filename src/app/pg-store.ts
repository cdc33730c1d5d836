import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Logger } from '../core/logger.js'
import type { Embedder, MemoryStore } from '../core/memory-store.js'
import { IDEMPOTENCY_TTL_MS } from '../session/idempotency.js'
import { checkLmdbFile } from '../store/lmdb-preflight.js'
import { memoryStoreValues } from '../store/lmdb-value-checks.js'
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
      onError: (err, what) => logger.warn({ err, database }, `${what} failed: the next attempt makes up for it`),
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

/**
 * Opens memory on PostgreSQL (BURROW_MEMORY_STORE=postgres): the entries in the database (its
 * migrations applied under the migration lock, as for the session store) and this replica's local
 * copy — keyword statistics and HNSW index — under `<dataDir>/memory-replica`. Fails start-up clearly.
 */
export async function openPgMemoryStore(config: Config, embedder: Embedder, logger: Logger): Promise<MemoryStore> {
  const [{ PgMemoryLog }, { SchemaTooNewError }, { ReplicatedMemoryStore }, { withoutLabels }] = await optional(
    () =>
      Promise.all([
        import('../store/pg-memory-log.js'),
        import('../store/pg-migrate.js'),
        import('../memory/replicated-memory-store.js'),
        import('../memory/posting-blocks.js'),
      ]),
    'pg, hnswlib-node and lmdb',
    'BURROW_MEMORY_STORE=postgres',
  )
  const url = config.databaseUrl!
  const database = describeDatabase(url)
  let log: Awaited<ReturnType<typeof PgMemoryLog.open>>
  try {
    log = await PgMemoryLog.open({
      url,
      poolSize: Math.max(2, Math.ceil(config.pgPoolSize / 2)),
      replicaId: config.replicaId,
      withoutLabels,
      idempotencyTtlMs: IDEMPOTENCY_TTL_MS,
      claimMs: config.leaseMs,
      onHealth: (writable, err) => {
        if (writable) logger.info({ database }, 'the memory database takes writes again: ready')
        else
          logger.error(
            { err, database },
            'the memory database cannot be reached or cannot write: memory requests fail with STORE_UNAVAILABLE',
          )
      },
    })
  } catch (err) {
    if (err instanceof SchemaTooNewError)
      throw new StartupError(
        `The database ${database} has schema version ${err.found}, newer than this Burrow knows (${err.known}): it was written by a newer release. Run that release (or a newer one), or set BURROW_DATABASE_URL to another database.`,
      )
    throw new StartupError(`Cannot open the memory database ${database}: ${(err as Error).message}`, { cause: err })
  }
  if (log.migrated.applied.length > 0) logger.info({ database, ...log.migrated }, 'migrated the memory database')
  const dataDir = join(config.dataDir, 'memory-replica')
  try {
    // LMDB trusts its file (a damaged one ends in SIGBUS, not an error): checked first, and a damaged
    // copy is thrown away — it is a cache of the database, made again from it.
    const data = join(dataDir, 'memory', 'lmdb', 'data.mdb')
    const found = await checkLmdbFile(data, memoryStoreValues())
    if (found.state === 'unreadable') throw new Error(`${data} cannot be read (${found.code})`)
    if (found.state === 'damaged') {
      logger.warn({ file: data, problem: found.problem }, 'the local copy of memory is damaged: it is made again from the database')
      rmSync(join(dataDir, 'memory'), { recursive: true, force: true })
    }
    return await ReplicatedMemoryStore.open({ dataDir, embedder, log, logger })
  } catch (err) {
    await log.close().catch(() => undefined)
    throw new StartupError(`Cannot open the local copy of memory in ${config.dataDir}: ${(err as Error).message}`, { cause: err })
  }
}
