import type pg from 'pg'
import type { IdempotencyRecord, IdempotencyStore } from '../core/stores.js'
import type { PgAccess } from './pg-access.js'

/**
 * Idempotency records in PostgreSQL, keyed like the service's keys — `tenant \0 session \0 key`
 * (session_id `-` for calls outside a session) — split into the row's key columns, since text
 * cannot hold the NUL separator and the key must lead with the tenant.
 */
export class PgIdempotencyStore implements IdempotencyStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly db: PgAccess,
    private readonly ttlMs: number,
  ) {}

  async get(key: string): Promise<IdempotencyRecord | undefined> {
    const [tenant, sid, k] = split(key)
    const r = await this.db.read(
      () =>
        this.pool.query({
          name: 'burrow_idem_get',
          text: 'SELECT record FROM idempotency WHERE tenant = $1 AND session_id = $2 AND key = $3',
          values: [tenant, sid, k],
        }),
      'the idempotency record',
    )
    const record = r.rows[0]?.record as IdempotencyRecord | undefined
    if (record && Date.now() - record.created_at >= this.ttlMs) {
      // Housekeeping on a read path: a store that cannot write must not fail the read.
      this.db
        .write(
          () =>
            this.pool.query('DELETE FROM idempotency WHERE tenant = $1 AND session_id = $2 AND key = $3 AND created_at = $4', [
              tenant,
              sid,
              k,
              record.created_at,
            ]),
          'an expired idempotency record',
        )
        .catch(() => undefined)
      return undefined
    }
    return record
  }

  async put(key: string, record: IdempotencyRecord): Promise<void> {
    const [tenant, sid, k] = split(key)
    await this.db.write(
      () =>
        this.pool.query({
          name: 'burrow_idem_put',
          text: `INSERT INTO idempotency (tenant, session_id, key, created_at, record) VALUES ($1, $2, $3, $4, $5::json)
                 ON CONFLICT (tenant, session_id, key) DO UPDATE SET created_at = excluded.created_at, record = excluded.record`,
          values: [tenant, sid, k, record.created_at, JSON.stringify(record)],
        }),
      'the idempotency record',
    )
  }

  /** `prefix` is `tenant \0 session \0`: a deleted session's records. */
  async deletePrefix(prefix: string): Promise<void> {
    const [tenant, sid, rest] = split(prefix)
    if (rest !== '') throw new Error('an idempotency prefix names a tenant and a session')
    await this.db.write(
      () => this.pool.query('DELETE FROM idempotency WHERE tenant = $1 AND session_id = $2', [tenant, sid]),
      'idempotency records',
    )
  }

  /** Drops expired records (at start-up and periodically). */
  async sweep(): Promise<number> {
    const r = await this.db.write(
      () => this.pool.query('DELETE FROM idempotency WHERE created_at <= $1', [Date.now() - this.ttlMs]),
      'the idempotency sweep',
    )
    return r.rowCount ?? 0
  }
}

function split(key: string): [string, string, string] {
  const a = key.indexOf('\u0000')
  const b = a < 0 ? -1 : key.indexOf('\u0000', a + 1)
  if (b < 0) throw new Error('an idempotency key is tenant \\0 session \\0 key')
  // The caller's own key may hold anything but NUL (a header value cannot): kept as it is.
  return [key.slice(0, a), key.slice(a + 1, b), key.slice(b + 1)]
}
