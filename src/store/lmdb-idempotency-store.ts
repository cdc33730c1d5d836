import type { Database } from 'lmdb'
import type { IdempotencyRecord, IdempotencyStore } from '../core/stores.js'
import type { WriteHealth } from '../core/write-health.js'

/** Idempotency records in LMDB, so a retry after a restart still gets the first result. */
export class LmdbIdempotencyStore implements IdempotencyStore {
  constructor(
    private readonly db: Database<unknown, string>,
    private readonly ttlMs: number,
    private readonly health: WriteHealth,
  ) {}

  async get(key: string): Promise<IdempotencyRecord | undefined> {
    const r = this.db.get(key) as IdempotencyRecord | undefined
    if (r && Date.now() - r.created_at >= this.ttlMs) {
      // Housekeeping on a read path: a store that cannot write must not fail the read.
      this.write(() => this.db.remove(key), 'an expired idempotency record').catch(() => undefined)
      return undefined
    }
    return r
  }

  put(key: string, record: IdempotencyRecord): Promise<void> {
    return this.write(() => this.db.put(key, record), 'the idempotency record')
  }

  deletePrefix(prefix: string): Promise<void> {
    return this.write(
      () =>
        this.db.childTransaction(() => {
          for (const k of this.db.getKeys({ start: prefix, end: `${prefix}\uffff` })) this.db.remove(k)
        }),
      'idempotency records',
    )
  }

  /** Drops expired records (run at open and periodically). */
  async sweep(): Promise<number> {
    let n = 0
    const now = Date.now()
    await this.write(
      () =>
        this.db.childTransaction(() => {
          for (const { key, value } of this.db.getRange()) {
            if (now - (value as IdempotencyRecord).created_at >= this.ttlMs) {
              this.db.remove(key)
              n++
            }
          }
        }),
      'the idempotency sweep',
    )
    return n
  }

  /** A write whose failure is `STORE_UNAVAILABLE` (its secondary rejection observed) and reaches the store's health. */
  private write(run: () => Promise<unknown>, what: string): Promise<void> {
    return this.health.run(run, what).then(() => undefined)
  }
}
