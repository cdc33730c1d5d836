// Helpers of the multi-replica tests: two real server processes on one fresh PostgreSQL database,
// and the log as PostgreSQL holds it.
import pg from 'pg'
import type { Test } from 'tap'
import type { SessionRecord } from '../../src/core/session-record.js'
import { assembleRecord, HISTORY_SQL, historyRows, SESSION_ROW_SQL } from '../../src/store/pg-session-layout.js'
import { spawnServer, stopServer, type ChildServer } from '../helpers/child-server.js'
import { tempDatabase } from '../helpers/pg.js'
import { tempDir } from '../helpers/temp-dir.js'

export interface StoredEvent {
  seq: number
  turn: number
  type: string
  data: any
}

/** A session's events straight from the database, in order. */
export async function storedLog(db: pg.Client, id: string): Promise<StoredEvent[]> {
  const r = await db.query('SELECT seq, turn, type, data FROM events WHERE session_id = $1 ORDER BY seq', [id])
  return r.rows.map((row) => ({ seq: Number(row.seq), turn: row.turn, type: row.type, data: row.data }))
}

/** The stored log's seqs run 1, 2, 3… with no gap. */
export function assertGapless(t: Test, log: readonly StoredEvent[], what = 'gapless'): void {
  t.same(
    log.map((e) => e.seq),
    log.map((_, i) => i + 1),
    what,
  )
}

/** A session's record as PostgreSQL holds it, read as the store reads it. */
export async function storedRecord(db: pg.Client, id: string): Promise<SessionRecord> {
  const row = (await db.query(SESSION_ROW_SQL, [id])).rows[0]
  const rows = (await db.query(HISTORY_SQL, [row.tenant, id, row.messages_from, row.last_seq])).rows
  return assembleRecord(id, row, historyRows(rows))
}

/**
 * Replicas `replica-a` and `replica-b` (sessions on PostgreSQL, memory off, each its own data
 * directory) on a database of their own, their model an OpenAI-compatible fake at `llmUrl`, and a
 * client of the database, with `env` on top of that configuration. Stopped (a frozen one continued
 * first; a killed one left as it is) and the database dropped at `t`'s teardown. Returns each
 * one's data directory, and its environment to restart it as a supervisor would (same replica id,
 * same data directory); a restarted process is the caller's to stop.
 */
export async function twoReplicas(
  t: Test,
  opts: { prefix: string; leaseMs: number; llmUrl: string; env?: Record<string, string> },
): Promise<{
  a: ChildServer
  b: ChildServer
  db: pg.Client
  dirs: { a: string; b: string }
  env: { a: Record<string, string>; b: Record<string, string> }
}> {
  const database = await tempDatabase(t, opts.prefix)
  const dirs = { a: await tempDir(t, `${opts.prefix}-replica-a`), b: await tempDir(t, `${opts.prefix}-replica-b`) }
  const env = async (name: 'replica-a' | 'replica-b') => ({
    BURROW_SESSION_STORE: 'postgres',
    BURROW_DATABASE_URL: database.url,
    BURROW_PG_POOL_SIZE: '3',
    BURROW_MEMORY_STORE: 'off',
    BURROW_DATA_DIR: name === 'replica-a' ? dirs.a : dirs.b,
    BURROW_REPLICA_ID: name,
    BURROW_LEASE_MS: String(opts.leaseMs),
    OPENAI_API_KEY: 'k',
    OPENAI_BASE_URL: `${opts.llmUrl}/v1`,
    LOG_LEVEL: 'info',
    ...opts.env,
  })
  const envA = await env('replica-a')
  const envB = await env('replica-b')
  const a = await spawnServer(envA)
  const b = await spawnServer(envB)
  const db = new pg.Client({ connectionString: database.url })
  await db.connect()
  t.teardown(async () => {
    for (const s of [a, b]) {
      if (s.child.signalCode === null && s.child.exitCode === null) s.child.kill('SIGCONT')
      await stopServer(s)
    }
    await db.end()
  })
  return { a, b, db, dirs, env: { a: envA, b: envB } }
}
