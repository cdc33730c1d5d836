import pg from 'pg'

/** How long taking a connection may wait (a database that does not answer is an outage, not a hang). */
const CONNECT_TIMEOUT_MS = 5_000
/** Longest a statement may run before the client gives up on it (server side: statement_timeout). */
const STATEMENT_TIMEOUT_MS = 30_000
/** Idle connections are closed after this long. */
const IDLE_TIMEOUT_MS = 30_000

export interface PgPoolOptions {
  url: string
  size: number
  /** Names the connections in pg_stat_activity. */
  applicationName: string
  /** Told when an idle connection fails (the database restarted, the backend was terminated). */
  onIdleError?: (err: Error) => void
}

/**
 * A node-postgres pool for the session store. The pool reconnects by itself: a connection that
 * fails is dropped and the next query opens a new one. An idle connection that fails makes the
 * pool emit 'error', which would end the process unhandled: it is always handled here.
 */
export function openPool(opts: PgPoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: opts.url,
    max: opts.size,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    idleTimeoutMillis: IDLE_TIMEOUT_MS,
    statement_timeout: STATEMENT_TIMEOUT_MS,
    keepAlive: true,
    application_name: opts.applicationName,
  })
  pool.on('error', (err) => opts.onIdleError?.(err))
  return pool
}

/**
 * Whether an error means the database cannot be reached or cannot take work now (connection
 * refused, reset, terminated, timed out, shutting down, too many connections, read-only), as
 * opposed to a statement the database refused.
 */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null
  const code = typeof e?.code === 'string' ? e.code : ''
  // SQLSTATE classes 08 (connection exception), 53 (insufficient resources: disk full, too many connections),
  // 57P (operator intervention: shutdown, terminated), 58 (system error: I/O), 28 (the login refused),
  // 3D000 (the database does not exist: dropped, or renamed away), 25006 (read-only transaction)
  if (/^(08|53|57P|58|28)/.test(code) || code === '3D000' || code === '25006') return true
  if (/^E[A-Z]+$/.test(code)) return true // ECONNREFUSED, ECONNRESET, ETIMEDOUT, EPIPE, ENOTFOUND, …
  const msg = typeof e?.message === 'string' ? e.message : ''
  return /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout|Connection ended/i.test(
    msg,
  )
}

/** Retries of a statement PostgreSQL chose as a deadlock's victim. */
const DEADLOCK_RETRIES = 3

/**
 * Runs a statement again when PostgreSQL aborted it as a deadlock's victim (40P01): batches of
 * several sessions' rows can meet another replica's batch on the same rows in another order
 * (only during a takeover). Any other failure, or a fourth deadlock, is thrown as it came.
 */
export async function retryingDeadlocks<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await run()
    } catch (err) {
      if ((err as { code?: string }).code !== '40P01' || attempt >= DEADLOCK_RETRIES) throw err
    }
  }
}
