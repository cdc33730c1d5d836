import type { IdempotencyRecord, IdempotencyStore } from '../core/stores.js'

/**
 * In-process idempotency records, expiring after `ttlMs` and capped at `max` (oldest first out).
 * Records are copied in and out, as the stores that serialize them do: a caller that changes a
 * value it put or was given back (a replayed result) must not change what a later retry gets.
 */
export class MemoryIdempotencyStore implements IdempotencyStore {
  private readonly records = new Map<string, IdempotencyRecord>()

  constructor(
    private readonly ttlMs: number,
    private readonly max = 100_000,
  ) {}

  async get(key: string): Promise<IdempotencyRecord | undefined> {
    const r = this.records.get(key)
    if (r && Date.now() - r.created_at >= this.ttlMs) {
      this.records.delete(key)
      return undefined
    }
    return r && structuredClone(r)
  }

  async put(key: string, record: IdempotencyRecord): Promise<void> {
    this.records.delete(key)
    this.records.set(key, structuredClone(record))
    while (this.records.size > this.max) this.records.delete(this.records.keys().next().value as string)
  }

  async deletePrefix(prefix: string): Promise<void> {
    for (const k of [...this.records.keys()]) if (k.startsWith(prefix)) this.records.delete(k)
  }
}
