import type { Database, Key, RootDatabase } from 'lmdb'
import type { EventEnvelope } from '../core/events.js'
import type { SessionConfig, SessionRecord } from '../core/session-record.js'
import type { BurrowDbs } from './lmdb-dbs.js'
import { applyWrites, sessionWrites, type Known, type Op } from './lmdb-layout.js'

/** The session reducer (injected: the store does not depend on the session layer). */
export type Fold = (record: SessionRecord | undefined, e: EventEnvelope) => SessionRecord

export interface Migrated {
  from: number
  sessions: number
  events: number
}

/** Events per log row written by the migration (a live batch writes what it has). */
const ROW_EVENTS = 256

/**
 * Schema 2 → 3, in one write transaction (a crash leaves the directory at schema 2, intact).
 * Schema 2 kept one msgpack value per event and a snapshot spread over several databases; the
 * event log is the source of truth, so each session's events are replayed through the reducer
 * and stored the way the batch writer stores them. Everything derived (snapshots, messages,
 * usage, indexes) is rebuilt; idempotency records are carried over; projection checkpoints are
 * dropped, so the projector writes every session's files again (the same bytes).
 */
export function migrateFromV2(root: RootDatabase, dbs: BurrowDbs, fold: Fold): Migrated {
  // Schema 2's values are msgpack, lmdb-js's default encoding: read them through handles that decode it.
  const v2 = <K extends Key>(name: string) => root.openDB<unknown, K>({ name })
  const oldEvents = v2<[string, number]>('events')
  const oldHeads = v2<string>('heads')
  const oldIdempotency = v2<string>('idempotency')
  const oldMessages = v2<[string, number]>('messages')
  let sessions = 0
  let events = 0
  root.transactionSync(() => {
    const ids = [...oldHeads.getKeys()] as string[]
    const idempotency = [...oldIdempotency.getRange()].map(({ key, value }) => ({ key, value }))
    // Derived or re-encoded: emptied first, written again below.
    const derived: Array<Database<unknown, Key>> = [
      dbs.heads,
      dbs.configs,
      dbs.tenants,
      dbs.notes,
      dbs.turnUsage,
      dbs.byTenant,
      dbs.byStatus,
      dbs.running,
      dbs.checkpoints,
      dbs.pending,
      dbs.idempotency,
    ]
    for (const db of derived) {
      for (const key of db.getKeys()) db.remove(key)
    }
    for (const key of oldMessages.getKeys()) oldMessages.remove(key)
    const migrated = new Set<string>()
    for (const sid of ids) {
      const log: EventEnvelope[] = []
      for (const { key, value } of oldEvents.getRange({ start: [sid, 0], end: [sid, Infinity] })) {
        log.push(value as EventEnvelope)
        oldEvents.remove(key)
      }
      let record: SessionRecord | undefined
      let known: Known | undefined
      for (let i = 0; i < log.length; i += ROW_EVENTS) {
        const rows = log.slice(i, i + ROW_EVENTS)
        for (const e of rows) record = fold(record, e)
        const ops: Op[] = []
        known = sessionWrites(dbs, rows, record!, known, ops)
        applyWrites(ops)
      }
      if (record) {
        migrated.add(sid)
        sessions++
        events += log.length
      }
    }
    // Events of sessions without a snapshot (none are expected) would otherwise stay behind in the old encoding.
    for (const key of oldEvents.getKeys()) if (!migrated.has((key as [string, number])[0])) oldEvents.remove(key)
    for (const { key, value } of idempotency) dbs.idempotency.put(key, value)
    dbs.meta.put('schema_version', 3)
  })
  return { from: 2, sessions, events }
}

/**
 * Schema 3 → 4: fills `tenants` (session id → tenant) from the configurations, in one write
 * transaction that also sets the version (a crash leaves the directory at schema 3, and the next
 * opening does it again). Nothing else changes. Schema 4 is a version of its own, not a quiet
 * addition, because a release of schema 3 would go on creating sessions without the record, and
 * the owner check would then not find them.
 */
export function migrateFromV3(root: RootDatabase, dbs: BurrowDbs): Migrated {
  let sessions = 0
  root.transactionSync(() => {
    for (const { key, value } of dbs.configs.getRange()) {
      dbs.tenants.put(key, (value as SessionConfig).tenant)
      sessions++
    }
    dbs.meta.put('schema_version', 4)
  })
  return { from: 3, sessions, events: 0 }
}
