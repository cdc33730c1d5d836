import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { open, type RootDatabase } from 'lmdb'
import { migrateFromV2, migrateFromV3, type Fold, type Migrated } from './lmdb-migrate.js'
import type { BurrowDbs } from './lmdb-dbs.js'

export type { BurrowDbs } from './lmdb-dbs.js'

export const SCHEMA_VERSION = 4

export interface LmdbEnv {
  root: RootDatabase
  dbs: BurrowDbs
  /** Set when opening upgraded the directory from an older schema. */
  migrated?: Migrated
  /** Resolves once every commit so far is on disk (fsync durability). */
  flushed(): Promise<void>
  close(): Promise<void>
}

export class SchemaMismatchError extends Error {}

/**
 * Opens (creating if needed) `<dataDir>/lmdb`. The caller holds the data directory's
 * process lock (see DataDirLock). Opening does not read sessions: start-up cost does
 * not grow with them — except once, when a directory of an older schema is upgraded: schema 3
 * by reading each session's configuration for its tenant, schema 2 by replaying its logs (with
 * `fold`, the session reducer; without it such a directory is refused), then as schema 3.
 */
export async function openLmdbEnv(dataDir: string, durability: 'fsync' | 'relaxed' = 'fsync', fold?: Fold): Promise<LmdbEnv> {
  mkdirSync(dataDir, { recursive: true })
  // relaxed: no fsync at all — a commit is in the OS's page cache, which survives the process
  // (kill -9) but not a power loss; fsync: every acknowledged commit is flushed first.
  const root: RootDatabase = open({
    path: join(dataDir, 'lmdb'),
    maxDbs: 20,
    noMemInit: true,
    ...(durability === 'relaxed' ? { noSync: true } : {}),
  })
  const db = <K extends import('lmdb').Key>(name: string) => root.openDB<unknown, K>({ name, encoding: 'json' })
  // meta keeps lmdb-js's default encoding (msgpack), as every schema so far: its version always reads.
  const meta = root.openDB<unknown, string>({ name: 'meta' })
  const version = meta.get('schema_version')
  if (version !== undefined && version !== SCHEMA_VERSION && version !== 3 && !(version === 2 && fold)) {
    // Refused before anything is opened that this build would create: the directory stays exactly as it was.
    await root.close()
    throw new SchemaMismatchError(
      `The data directory ${dataDir} has schema version ${String(version)}; this build reads version ${SCHEMA_VERSION}` +
        (version === 2 ? ' and upgrades version 2 when the service opens it.' : '.'),
    )
  }
  const dbs: BurrowDbs = {
    meta,
    events: db('events'),
    heads: db('heads'),
    configs: db('configs'),
    tenants: db('session_tenants'),
    notes: db('notes'),
    turnUsage: db('turn_usage'),
    byTenant: db('by_tenant'),
    byStatus: db('by_status'),
    running: db('running'),
    checkpoints: db('projection_checkpoints'),
    pending: db('projection_pending'),
    idempotency: db('idempotency'),
    tenantLog: db('tenant_log'),
  }
  let migrated: Migrated | undefined
  if (version === undefined) {
    await dbs.meta.put('schema_version', SCHEMA_VERSION)
  } else if (version !== SCHEMA_VERSION) {
    if (version === 2 && fold) migrated = migrateFromV2(root, dbs, fold)
    const tenants = migrateFromV3(root, dbs)
    migrated ??= tenants
    await root.flushed
  }
  let closing: Promise<void> | null = null
  return {
    root,
    dbs,
    ...(migrated ? { migrated } : {}),
    async flushed() {
      await root.flushed
    },
    close() {
      closing ??= root.close()
      return closing
    },
  }
}
