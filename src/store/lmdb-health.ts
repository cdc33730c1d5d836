import type { Database } from 'lmdb'
import { storeUnavailable } from '../core/errors.js'

/** How often a store whose writes failed tries a probe write (readiness comes back within this). */
export const PROBE_INTERVAL_MS = 1_000
/**
 * A probe writes this much and removes it again: "writable" means a real amount of room, not one
 * free page — LMDB reuses freed pages, so a tiny write can succeed on a full disk while a turn's fails.
 * Written in a first transaction and removed in a second, so the pages really reach the file (and stay
 * as free pages for the writes that follow).
 */
const PROBE_BYTES = 1 << 20
const PROBE_CHUNK = 1000

/**
 * Whether an LMDB environment takes writes. A failed write turns it unhealthy; a successful one
 * (or a probe, every PROBE_INTERVAL_MS while unhealthy) turns it healthy again, so readiness
 * recovers by itself once space is back — nothing else has to write first (a load balancer that
 * stops sending traffic to an unready replica would otherwise keep it unready for ever).
 */
export class LmdbHealth {
  private failure: unknown = null
  private timer: NodeJS.Timeout | null = null
  private probing = false
  private closed = false

  constructor(private readonly db: Database<unknown, string>, private readonly onChange: (writable: boolean, err?: unknown) => void = () => {}) {}

  get writable(): boolean { return this.failure === null }

  /** A write failed: unhealthy until a write or a probe succeeds. */
  failed(err: unknown): void {
    const was = this.failure === null
    this.failure = err
    if (was) this.onChange(false, err)
    if (!this.timer && !this.closed) {
      this.timer = setInterval(() => void this.probe(), PROBE_INTERVAL_MS)
      this.timer.unref()
    }
  }

  /** A write succeeded. */
  succeeded(): void {
    if (this.failure === null) return
    this.failure = null
    this.stop()
    this.onChange(true)
  }

  close(): void {
    this.closed = true
    this.stop()
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
  }

  private async probe(): Promise<void> {
    if (this.probing || this.closed) return
    this.probing = true
    try {
      // Small values (no overflow pages: lmdb-js aborts the process on a failed write of a large one).
      const chunk = 'p'.repeat(PROBE_CHUNK)
      await this.db.transaction(() => { for (let i = 0; i < PROBE_BYTES / PROBE_CHUNK; i++) void this.db.put(`__probe__${i}`, chunk) })
      await this.db.transaction(() => { for (let i = 0; i < PROBE_BYTES / PROBE_CHUNK; i++) void this.db.remove(`__probe__${i}`) })
      this.succeeded()
    } catch (err) {
      storeUnavailable(err, 'a probe write') // observes lmdb-js's secondary rejection; still unhealthy
    } finally {
      this.probing = false
    }
  }
}
