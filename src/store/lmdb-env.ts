import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { open, type Database, type RootDatabase } from 'lmdb'
import { migrateFromV2, type Fold, type Migrated } from './lmdb-migrate.js'

export const SCHEMA_VERSION = 3

/** The named databases of Burrow's LMDB environment (keys are ordered-binary, values JSON). */
export interface BurrowDbs {
  meta: Database<unknown, string>
  /** [session_id, first seq] → a LogRow: the consecutive events one batch appended to the session's log, and the messages they added */
  events: Database<unknown, [string, number]>
  /** session_id → snapshot head (the record without its configuration, notes and long lists) */
  heads: Database<unknown, string>
  /** session_id → configuration (written once, at creation) */
  configs: Database<unknown, string>
  /** session_id → session notes (written when they change) */
  notes: Database<unknown, string>
  /** [session_id, chunk] → [turn, input, output, compaction] tokens of turns chunk·16+1 … chunk·16+16 (the chunk still filling lives in the head) */
  turnUsage: Database<unknown, [string, number]>
  /** [tenant, session_id] → 1, and [tenant, status, session_id] → 1: list indexes */
  byTenant: Database<unknown, [string, string]>
  byStatus: Database<unknown, [string, string, string]>
  /** session_id → turn: sessions whose committed state has a turn running */
  running: Database<unknown, string>
  /** session_id → seq: projection checkpoints, and sessions committed past theirs */
  checkpoints: Database<unknown, string>
  pending: Database<unknown, string>
  /** tenant \0 session \0 key → idempotency record */
  idempotency: Database<unknown, string>
}

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
 * not grow with them — except once, when a directory of schema 2 is upgraded (with `fold`,
 * the session reducer; without it such a directory is refused).
 */
export async function openLmdbEnv(dataDir: string, durability: 'fsync' | 'relaxed' = 'fsync', fold?: Fold): Promise<LmdbEnv> {
  mkdirSync(dataDir, { recursive: true })
  // relaxed: no fsync at all — a commit is in the OS's page cache, which survives the process
  // (kill -9) but not a power loss; fsync: every acknowledged commit is flushed first.
  const root: RootDatabase = open({ path: join(dataDir, 'lmdb'), maxDbs: 20, noMemInit: true, ...(durability === 'relaxed' ? { noSync: true } : {}) })
  const db = <K extends import('lmdb').Key>(name: string) => root.openDB<unknown, K>({ name, encoding: 'json' })
  const dbs: BurrowDbs = {
    // meta keeps lmdb-js's default encoding (msgpack), as every schema so far: its version always reads.
    meta: root.openDB<unknown, string>({ name: 'meta' }), events: db('events'), heads: db('heads'), configs: db('configs'), notes: db('notes'), turnUsage: db('turn_usage'),
    byTenant: db('by_tenant'), byStatus: db('by_status'), running: db('running'), checkpoints: db('projection_checkpoints'),
    pending: db('projection_pending'), idempotency: db('idempotency'),
  }
  const version = dbs.meta.get('schema_version')
  let migrated: Migrated | undefined
  if (version === undefined) {
    await dbs.meta.put('schema_version', SCHEMA_VERSION)
  } else if (version === 2 && fold) {
    migrated = migrateFromV2(root, dbs, fold)
    await root.flushed
  } else if (version !== SCHEMA_VERSION) {
    await root.close()
    throw new SchemaMismatchError(`The data directory ${dataDir} has schema version ${String(version)}; this build reads version ${SCHEMA_VERSION}` +
      (version === 2 ? ' and upgrades version 2 when the service opens it.' : '.'))
  }
  let closing: Promise<void> | null = null
  return {
    root, dbs, ...(migrated ? { migrated } : {}),
    async flushed() { await root.flushed },
    close() {
      closing ??= root.close()
      return closing
    },
  }
}
