import { BurrowError } from '../core/errors.js'

interface Waiter {
  go: () => void
}

/**
 * The right to run work (a turn, a manual compaction) on a session in this process, with a line
 * of requests waiting for it (`on_busy: queue`, docs/api.md "The busy policy"). A release hands
 * the slot straight to the first in line — no moment where it is free — so a queued turn starts
 * as soon as the one before it has ended, and a request arriving meanwhile cannot take its place.
 */
export class TurnSlot {
  private held = false
  private readonly line: Waiter[] = []

  /** Requests waiting in line. */
  get queued(): number {
    return this.line.length
  }

  /** Takes the slot if it is free; false if work holds it. */
  tryTake(): boolean {
    if (this.held) return false
    this.held = true
    return true
  }

  /**
   * Waits in line (`front`: ahead of those waiting) and resolves holding the slot. At once when it
   * is free; `onQueued` is told the place in line (1 = next) when the request has to wait. A full
   * line (`limit` waiting) is SESSION_BUSY.
   */
  take(opts: { limit: number; front?: boolean; onQueued?: ((position: number) => void) | undefined }): Promise<void> {
    if (this.tryTake()) return Promise.resolve()
    if (this.line.length >= opts.limit)
      return Promise.reject(
        new BurrowError('SESSION_BUSY', `${this.line.length} turns already wait on this session; try again later.`, {
          reason: 'queue_full',
          queued: this.line.length,
        }),
      )
    return new Promise<void>((resolve) => {
      const w: Waiter = { go: resolve }
      if (opts.front) this.line.unshift(w)
      else this.line.push(w)
      opts.onQueued?.(opts.front ? 1 : this.line.length)
    })
  }

  /** Hands the slot to the first in line, or frees it. */
  release(): void {
    const next = this.line.shift()
    if (next) next.go()
    else this.held = false
  }
}
