import { storeUnavailable } from './errors.js'

/** How long an unhealthy store waits between the probe writes a health check may start. */
export const PROBE_INTERVAL_MS = 1_000

/**
 * Whether a store takes writes: unhealthy after a write failed (disk full, I/O error, database
 * gone), healthy again after the next one succeeds. While unhealthy, asking (`writable`) starts a
 * probe write at most once per PROBE_INTERVAL_MS, so readiness comes back by itself once the store
 * can write again even when nothing else writes — a load balancer that stops sending traffic to an
 * unready instance would otherwise keep it unready for ever. The store supplies the probe (the
 * mechanism does no I/O of its own); failed writes leave as `STORE_UNAVAILABLE`.
 */
export class WriteHealth {
  private failure = false
  private probing = false
  private lastProbe = 0
  private closed = false

  constructor(
    private readonly probe: () => Promise<unknown>,
    /** Told when writes start failing (with the error) and when they work again. */
    private readonly onChange: (writable: boolean, err?: unknown) => void = () => {},
  ) {}

  /**
   * Runs one write: its failure is recorded and rethrown as `STORE_UNAVAILABLE` (naming `what`,
   * observing a storage library's secondary rejection), its success makes the store healthy.
   */
  async run<T>(write: () => Promise<T>, what: string): Promise<T> {
    let result: T
    try {
      result = await write()
    } catch (err) {
      this.failed(err)
      throw storeUnavailable(err, what)
    }
    this.succeeded()
    return result
  }

  /** A write failed (for writers that report outcomes themselves, such as a batch writer). */
  failed(err: unknown): void {
    if (!this.failure) {
      this.failure = true
      this.onChange(false, err)
    }
  }

  /** A write succeeded. */
  succeeded(): void {
    if (this.failure) {
      this.failure = false
      this.onChange(true)
    }
  }

  get writable(): boolean {
    if (this.failure && !this.closed && !this.probing && Date.now() - this.lastProbe >= PROBE_INTERVAL_MS) {
      this.probing = true
      this.lastProbe = Date.now()
      this.run(this.probe, 'a probe write')
        .catch(() => undefined) // the failure is the state this reports; run() observed it
        .finally(() => {
          this.probing = false
        })
    }
    return !this.failure
  }

  /** No more probes (the store is closing). */
  close(): void {
    this.closed = true
  }
}
