import type pg from 'pg'
import type { IdempotencyClaim, IdempotencyRecord, IdempotencyStore } from '../core/stores.js'
import type { PgAccess } from './pg-access.js'
import { splitIdempotencyKey } from './idempotency-key.js'

// Insert if absent, in one statement: a new key, an expired record, or a claim whose replica
// stopped renewing it becomes this replica's claim; otherwise the row as it stands is returned
// (absent only when another claim committed after this statement's snapshot: the caller asks again).
const CLAIM = `WITH c AS (
  INSERT INTO idempotency AS i (tenant, session_id, key, created_at, record, owner, pending_until)
  VALUES ($1, $2, $3, $4, $5::json, $6, now() + $7 * interval '1 millisecond')
  ON CONFLICT (tenant, session_id, key) DO UPDATE SET created_at = excluded.created_at, record = excluded.record,
    owner = excluded.owner, pending_until = excluded.pending_until
  WHERE (i.pending_until IS NOT NULL AND i.pending_until <= now()) OR (i.pending_until IS NULL AND i.created_at <= $8)
  RETURNING 1)
SELECT (SELECT count(*) FROM c)::int AS claimed, i.record, i.pending_until IS NOT NULL AS pending
FROM (SELECT 1) one LEFT JOIN idempotency i ON i.tenant = $1 AND i.session_id = $2 AND i.key = $3`

/**
 * Idempotency records in PostgreSQL, keyed like the service's keys — `tenant \0 session \0 key`
 * (session_id `-` for calls outside a session) — split into the row's key columns, since text
 * cannot hold the NUL separator and the key must lead with the tenant.
 */
export class PgIdempotencyStore implements IdempotencyStore {
  /** Keys this process has claimed and not completed: their claims are renewed while it runs them. */
  private readonly claimed = new Set<string>()
  private renewal: NodeJS.Timeout | null = null

  constructor(
    private readonly pool: pg.Pool,
    private readonly db: PgAccess,
    private readonly ttlMs: number,
    /** The replica id: who runs a claimed call. */
    private readonly owner: string,
    /** How long a claim holds unless renewed (the lease duration). */
    private readonly claimMs: number,
  ) {}

  async claim(key: string, fingerprint: string): Promise<IdempotencyClaim> {
    const [tenant, sid, k] = split(key)
    const now = Date.now()
    const pending = JSON.stringify({ fingerprint, created_at: now, outcome: null })
    const r = await this.db.write(
      () =>
        this.pool.query({
          name: 'burrow_idem_claim',
          text: CLAIM,
          values: [tenant, sid, k, now, pending, this.owner, this.claimMs, now - this.ttlMs],
        }),
      'the idempotency record',
    )
    const row = r.rows[0]
    if (row.claimed === 1) {
      this.claimed.add(key)
      this.renewal ??= setInterval(() => this.renew(), Math.max(100, Math.floor(this.claimMs / 3)))
      this.renewal.unref()
      return { kind: 'claimed', at: now }
    }
    const record = row.record as IdempotencyRecord | null
    if (!record) return { kind: 'running', fingerprint } // claimed meanwhile by another: asked again
    return row.pending ? { kind: 'running', fingerprint: record.fingerprint } : { kind: 'done', record }
  }

  async release(key: string): Promise<void> {
    const [tenant, sid, k] = split(key)
    this.settle(key)
    await this.db.write(
      () =>
        this.pool.query(
          'DELETE FROM idempotency WHERE tenant = $1 AND session_id = $2 AND key = $3 AND owner = $4 AND pending_until IS NOT NULL',
          [tenant, sid, k, this.owner],
        ),
      'the idempotency record',
    )
  }

  /**
   * Expires the claims this owner name still holds: an earlier process's with the same replica id,
   * which died (this one holds none yet), so a retry takes them over now, not a lease later.
   */
  async releaseOwned(): Promise<number> {
    const r = await this.db.write(
      () => this.pool.query('UPDATE idempotency SET pending_until = now() WHERE owner = $1 AND pending_until > now()', [this.owner]),
      'the idempotency claims of an earlier process',
    )
    return r.rowCount ?? 0
  }

  /** The key's outcome was committed with its work (pg-commit-batch.ts): its claim needs no renewal. */
  completed(key: string): void {
    this.settle(key)
  }

  /** Stops renewing (the process is closing); claims left expire and can be taken by another replica. */
  close(): void {
    if (this.renewal) clearInterval(this.renewal)
    this.renewal = null
    this.claimed.clear()
  }

  private settle(key: string): void {
    this.claimed.delete(key)
    if (this.claimed.size === 0 && this.renewal) {
      clearInterval(this.renewal)
      this.renewal = null
    }
  }

  /** One statement renews every claim of this replica. */
  private renew(): void {
    this.db
      .write(
        () =>
          this.pool.query(
            `UPDATE idempotency SET pending_until = now() + $2 * interval '1 millisecond' WHERE owner = $1 AND pending_until IS NOT NULL`,
            [this.owner, this.claimMs],
          ),
        'idempotency claims',
      )
      .catch(() => undefined) // an outage: the claims may expire, and a retry elsewhere then runs the call again
  }

  async get(key: string): Promise<IdempotencyRecord | undefined> {
    const [tenant, sid, k] = split(key)
    const r = await this.db.read(
      () =>
        this.pool.query({
          name: 'burrow_idem_get',
          text: 'SELECT record FROM idempotency WHERE tenant = $1 AND session_id = $2 AND key = $3 AND pending_until IS NULL',
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
    this.settle(key)
    await this.db.write(
      () =>
        this.pool.query({
          name: 'burrow_idem_put',
          text: `INSERT INTO idempotency (tenant, session_id, key, created_at, record) VALUES ($1, $2, $3, $4, $5::json)
                 ON CONFLICT (tenant, session_id, key) DO UPDATE SET created_at = excluded.created_at, record = excluded.record,
                   pending_until = NULL`,
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

  /**
   * Drops expired records (at start-up and periodically), and the claims older than the TTL that
   * nobody renews any more: a replica that died running a call whose key is never retried leaves
   * one, and no claim or put would ever replace it. A live claim is renewed, so never dropped.
   */
  async sweep(): Promise<number> {
    const r = await this.db.write(
      () =>
        this.pool.query('DELETE FROM idempotency WHERE created_at <= $1 AND (pending_until IS NULL OR pending_until <= now())', [
          Date.now() - this.ttlMs,
        ]),
      'the idempotency sweep',
    )
    return r.rowCount ?? 0
  }
}

const split = splitIdempotencyKey
