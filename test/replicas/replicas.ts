// Helpers of the multi-replica tests: two real server processes on one fresh PostgreSQL database,
// and the log as PostgreSQL holds it.
import pg from 'pg'
import type { Test } from 'tap'
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

/**
 * Replicas `replica-a` and `replica-b` (sessions on PostgreSQL, memory off, each its own data
 * directory) on a database of their own, their model an OpenAI-compatible fake at `llmUrl`, and a
 * client of the database. Stopped (a frozen one continued first; a killed one left as it is) and
 * the database dropped at `t`'s teardown. `env` is each one's environment, to restart it as a
 * supervisor would (same replica id, same data directory); a restarted process is the caller's to stop.
 */
export async function twoReplicas(
  t: Test,
  opts: { prefix: string; leaseMs: number; llmUrl: string },
): Promise<{ a: ChildServer; b: ChildServer; db: pg.Client; env: { a: Record<string, string>; b: Record<string, string> } }> {
  const database = await tempDatabase(t, opts.prefix)
  const env = async (name: string) => ({
    BURROW_SESSION_STORE: 'postgres',
    BURROW_DATABASE_URL: database.url,
    BURROW_PG_POOL_SIZE: '3',
    BURROW_MEMORY_STORE: 'off',
    BURROW_DATA_DIR: await tempDir(t, `${opts.prefix}-${name}`),
    BURROW_REPLICA_ID: name,
    BURROW_LEASE_MS: String(opts.leaseMs),
    OPENAI_API_KEY: 'k',
    OPENAI_BASE_URL: `${opts.llmUrl}/v1`,
    LOG_LEVEL: 'info',
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
  return { a, b, db, env: { a: envA, b: envB } }
}
