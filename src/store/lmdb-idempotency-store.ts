import type { Database } from 'lmdb'
import type { IdempotencyRecord, IdempotencyStore } from '../core/stores.js'

/** Idempotency records in LMDB, so a retry after a restart still gets the first result. */
export class LmdbIdempotencyStore implements IdempotencyStore {
  constructor(private readonly db: Database<unknown, string>, private readonly ttlMs: number) {}

  async get(key: string): Promise<IdempotencyRecord | undefined> {
    const r = this.db.get(key) as IdempotencyRecord | undefined
    if (r && Date.now() - r.created_at >= this.ttlMs) {
      await this.db.remove(key)
      return undefined
    }
    return r
  }

  async put(key: string, record: IdempotencyRecord): Promise<void> {
    await this.db.put(key, record)
  }

  async deletePrefix(prefix: string): Promise<void> {
    await this.db.childTransaction(() => {
      for (const k of this.db.getKeys({ start: prefix, end: `${prefix}\uffff` })) this.db.remove(k)
    })
  }

  /** Drops expired records (run at open and periodically). */
  async sweep(): Promise<number> {
    let n = 0
    const now = Date.now()
    await this.db.childTransaction(() => {
      for (const { key, value } of this.db.getRange()) {
        if (now - (value as IdempotencyRecord).created_at >= this.ttlMs) { this.db.remove(key); n++ }
      }
    })
    return n
  }
}
