import type pg from 'pg'
import { storeUnavailable, storeUnreachable } from '../core/errors.js'
import { PROBE_INTERVAL_MS, WriteHealth } from '../core/write-health.js'
import { isConnectionError } from './pg-pool.js'

/**
 * How the PostgreSQL store reaches its database and keeps its health. A failure to reach the
 * database — on a write, a read, or an idle connection — makes the store unhealthy: `writable()`
 * is false, and a probe write (`SELECT txid_current()`: takes a transaction id, so a read-only
 * server fails it) runs at most once per PROBE_INTERVAL_MS while someone asks, until one succeeds.
 *
 * Unlike a disk, a database can go away while nobody writes: asking `writable()` when nothing
 * has reached the database for PROBE_INTERVAL_MS probes it too, so `/readyz`, polled, notices an
 * outage without waiting for a request to fail.
 */
export class PgAccess {
  readonly health: WriteHealth
  private lastContact = Date.now()
  private checking = false
  private closed = false

  constructor(
    private readonly pool: pg.Pool,
    onHealth?: (writable: boolean, err?: unknown) => void,
  ) {
    this.health = new WriteHealth(() => this.probe(), onHealth)
  }

  /** A write: its failure is `STORE_UNAVAILABLE`; a failure to reach the database makes the store unhealthy. */
  async write<T>(run: () => Promise<T>, what: string): Promise<T> {
    let result: T
    try {
      result = await run()
    } catch (err) {
      if (isConnectionError(err)) this.health.failed(err)
      throw storeUnavailable(err, what)
    }
    this.lastContact = Date.now()
    this.health.succeeded()
    return result
  }

  /** A read: its failure is `STORE_UNAVAILABLE` (could not be read); one to reach the database makes the store unhealthy. */
  async read<T>(run: () => Promise<T>, what: string): Promise<T> {
    try {
      const result = await run()
      this.lastContact = Date.now()
      return result
    } catch (err) {
      if (isConnectionError(err)) this.health.failed(err)
      throw storeUnreachable(err, what)
    }
  }

  /**
   * An idle connection failed (the pool dropped it). The database may be gone, or only that
   * backend (terminated, timed out): the next `writable()` probes at once to tell which.
   */
  connectionLost(): void {
    this.lastContact = 0
  }

  writable(): boolean {
    const writable = this.health.writable // probes by itself while unhealthy
    if (writable && !this.closed && !this.checking && Date.now() - this.lastContact >= PROBE_INTERVAL_MS) {
      this.checking = true
      this.lastContact = Date.now()
      this.health
        .run(() => this.probe(), 'a probe write')
        .catch(() => undefined) // the failure is the state writable() reports
        .finally(() => {
          this.checking = false
        })
    }
    return writable
  }

  close(): void {
    this.closed = true
    this.health.close()
  }

  private async probe(): Promise<void> {
    await this.pool.query('SELECT txid_current()')
    this.lastContact = Date.now()
  }
}
