import * as lmdb from 'lmdb'
import type { Database } from 'lmdb'
import type { IdempotencyRecord, IdempotencyStore } from '../core/stores.js'
import type { WriteHealth } from '../core/write-health.js'
import { storedIdempotencyKey } from './idempotency-key.js'

// lmdb-js's key encoder (ordered-binary's), exported at run time though its typings leave it out.
const encodeKey = (lmdb as unknown as { keyValueToBuffer(key: string): Uint8Array }).keyValueToBuffer
const PAD = 'x'.repeat(64)

/**
 * Where the keys starting with `prefix` lie. lmdb-js writes a string key of fewer than 64 characters
 * with its low control characters escaped (NUL as 4 0), and a longer one as plain UTF-8: the keys of
 * one session sit in two byte ranges, and a key with a UUID Idempotency-Key is a long one. Each
 * range runs from the prefix in that encoding to the same bytes followed by 0xff, a byte neither
 * encoding writes (so keys whose own part starts with an emoji or U+FFFF are inside too).
 */
function prefixRanges(prefix: string): Array<{ start: Uint8Array; end: Uint8Array }> {
  const short = Uint8Array.from(encodeKey(prefix))
  const padded = encodeKey(prefix + PAD)
  const long = Uint8Array.from(padded.subarray(0, padded.length - PAD.length))
  const past = (b: Uint8Array) => Uint8Array.from([...b, 0xff])
  return [
    { start: short, end: past(short) },
    { start: long, end: past(long) },
  ]
}

/**
 * The string a key was stored under, as `getKeys` gives it back: a long key (plain UTF-8, its NULs
 * unescaped) reads back as the array of its NUL-separated parts.
 */
function storedKey(k: unknown): string {
  return Array.isArray(k) ? k.join('\u0000') : String(k)
}

/** Idempotency records in LMDB, so a retry after a restart still gets the first result. */
export class LmdbIdempotencyStore implements IdempotencyStore {
  constructor(
    private readonly db: Database<unknown, string>,
    private readonly ttlMs: number,
    private readonly health: WriteHealth,
  ) {}

  async get(key: string): Promise<IdempotencyRecord | undefined> {
    const stored = storedIdempotencyKey(key)
    const r = this.db.get(stored) as IdempotencyRecord | undefined
    if (r && Date.now() - r.created_at >= this.ttlMs) {
      // Housekeeping on a read path: a store that cannot write must not fail the read.
      this.write(() => this.db.remove(stored), 'an expired idempotency record').catch(() => undefined)
      return undefined
    }
    return r
  }

  put(key: string, record: IdempotencyRecord): Promise<void> {
    return this.write(() => this.db.put(storedIdempotencyKey(key), record), 'the idempotency record')
  }

  deletePrefix(prefix: string): Promise<void> {
    return this.write(
      () =>
        this.db.childTransaction(() => {
          for (const range of prefixRanges(prefix))
            for (const k of this.db.getKeys(range)) {
              const key = storedKey(k)
              if (key.startsWith(prefix)) this.db.remove(key)
            }
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
