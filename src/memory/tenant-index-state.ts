/** What the main thread knows of one tenant's index in the index worker. */
export interface TenantState {
  readonly key: string
  /** Names this index in messages: a later open (a rebuild, a restarted worker) makes a new one. */
  readonly epoch: number
  /** Resolves once the worker holds the index: true, or false when it could not (it stopped). */
  ready: Promise<boolean>
  loaded: boolean
  /** Labels below this are in the index (or deleted): acknowledged by the worker. */
  covered: number
  /** Labels below this were handed to the worker (or skipped: deleted, or without a usable vector). */
  sent: number
  /** Changes since the last save, as the worker last reported them. */
  dirty: number
  /** Built from scratch (no usable file): saved, and logged, once complete. */
  rebuilding: boolean
  /** An insert of a rebuild failed: nothing more is sent until the next add. */
  stalled: boolean
  /** Woken by the worker's next report on this index (or by its stop, a reopen, a close). */
  waiters: Array<() => void>
}

/** Resolves at the state's next wake-up. */
export function nextReport(st: TenantState): Promise<void> {
  return new Promise<void>((r) => st.waiters.push(r))
}

export function wake(st: TenantState): void {
  for (const w of st.waiters.splice(0)) w()
}
