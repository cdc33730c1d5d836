/**
 * A turn's cancellation. Most turns are never cancelled, and an AbortController is
 * costly to create, so the signal is made only when someone asks for it (a network
 * provider does; the offline one does not) — already aborted if the turn was.
 */
export class Cancellation {
  private controller: AbortController | null = null
  private why: unknown = undefined
  aborted = false

  get reason(): unknown {
    return this.why
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController()
      if (this.aborted) this.controller.abort(this.why)
    }
    return this.controller.signal
  }

  abort(reason: unknown): void {
    if (this.aborted) return
    this.aborted = true
    this.why = reason
    this.controller?.abort(reason)
  }
}
