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
 * client of the database, with `env` on top of that configuration. Stopped (a frozen one continued first; a killed one left as it is) and
 * the database dropped at `t`'s teardown.
 */
export async function twoReplicas(
  t: Test,
  opts: { prefix: string; leaseMs: number; llmUrl: string; env?: Record<string, string> },
): Promise<{ a: ChildServer; b: ChildServer; db: pg.Client; dirs: { a: string; b: string } }> {
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
  const a = await spawnServer(await env('replica-a'))
  const b = await spawnServer(await env('replica-b'))
  const db = new pg.Client({ connectionString: database.url })
  await db.connect()
  t.teardown(async () => {
    for (const s of [a, b]) {
      if (s.child.signalCode === null && s.child.exitCode === null) s.child.kill('SIGCONT')
      await stopServer(s)
    }
    await db.end()
  })
  return { a, b, db, dirs }
}
