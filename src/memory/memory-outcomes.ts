import type { Database } from 'lmdb'
import { idempotencyKeyParts } from '../core/idempotency-keys.js'
import type { IdempotencyRecord, IdempotencyStore, IdempotencyWrite } from '../core/stores.js'
import type { WriteHealth } from '../core/write-health.js'

/** [tenant, scope, caller's key as JSON text]. */
type RowKey = [string, string, string]

/**
 * The outcomes of idempotent memory adds, kept in the memory store's own LMDB environment: an
 * add writes its outcome in the transaction that stores its entries ({@link writeIn}), so a crash
 * leaves both or neither — the session store's environment is another file, and its transaction
 * cannot take the entries. A row's key is the service key's tenant, scope and caller's part; the
 * caller's part as JSON text, which escapes the control characters and lone surrogates a lmdb-js
 * key cannot hold as they are.
 */
export class MemoryAddOutcomes implements IdempotencyStore {
  constructor(
    private readonly db: Database<IdempotencyRecord, RowKey>,
    private readonly ttlMs: number,
    private readonly health: WriteHealth,
  ) {}

  async get(key: string): Promise<IdempotencyRecord | undefined> {
    const k = rowKey(key)
    const r = this.db.get(k)
    if (r && Date.now() - r.created_at >= this.ttlMs) {
      // Housekeeping on a read path: a store that cannot write must not fail the read.
      this.health.run(() => this.db.remove(k), 'an expired idempotency record').catch(() => undefined)
      return undefined
    }
    return r
  }

  /** An outcome whose work wrote nothing here. */
  async put(key: string, record: IdempotencyRecord): Promise<void> {
    await this.health.run(() => this.db.put(rowKey(key), record), 'the idempotency record')
  }

  /** Inside the transaction that stores an add's entries. */
  writeIn(w: IdempotencyWrite): void {
    void this.db.put(rowKey(w.key), w.record)
  }

  async deletePrefix(prefix: string): Promise<void> {
    const [tenant, scope] = prefix.split('\u0000')
    await this.health.run(
      () =>
        this.db.childTransaction(() => {
          for (const k of this.db.getKeys({ start: [tenant!, scope!, ''], end: [tenant!, scope!, '\uffff'] })) void this.db.remove(k)
        }),
      'idempotency records',
    )
  }

  /** Drops expired records (at open). */
  async sweep(): Promise<number> {
    let n = 0
    const now = Date.now()
    await this.health.run(
      () =>
        this.db.childTransaction(() => {
          for (const { key, value } of this.db.getRange()) {
            if (now - value.created_at < this.ttlMs) continue
            void this.db.remove(key)
            n++
          }
        }),
      'the idempotency sweep',
    )
    return n
  }
}

/** `tenant \0 scope \0 key` as a row key. */
function rowKey(key: string): RowKey {
  const [tenant, scope, caller] = idempotencyKeyParts(key)
  return [tenant, scope, JSON.stringify(caller)]
}
