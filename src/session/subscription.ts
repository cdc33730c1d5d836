import type { EventEnvelope } from '../core/events.js'
import type { EventSubscription, StreamControl, StreamFrame } from '../core/session-service.js'

/**
 * One subscriber's bounded queue. Publishing never blocks: a consumer that falls
 * `limit` frames behind is dropped with a `stream_closed` (`slow_consumer`) frame
 * and can reconnect with Last-Event-ID. Consecutive text deltas of one turn are
 * coalesced while queued, and the consumer takes everything ready in one batch.
 */
export class Subscription implements EventSubscription {
  private queue: StreamFrame[] = []
  private waiter: ((r: IteratorResult<StreamFrame[]>) => void) | null = null
  private wakeScheduled = false
  private ended = false
  private closing = false
  /** Events published while a replay is loading; released after it (see `hold`). */
  private held: EventEnvelope[] | null = null
  private lastSeq = 0
  private endCallbacks: Array<() => void> = []
  /** Push mode (see attach): the writer, whether it is paused, and who to tell at the end. */
  private writer: ((batch: StreamFrame[]) => boolean) | null = null
  private paused = false
  private onDone: (() => void) | null = null

  constructor(
    private readonly limit: number,
    private readonly onClose: (s: Subscription) => void,
    readonly sessionId: string | null,
    /** Arranges for `wake()` to be called soon; the hub batches many subscriptions into one tick. */
    private readonly schedule: (s: Subscription) => void = (s) => queueMicrotask(() => s.wake()),
  ) {}

  /** Delivers a live event; returns false once the subscription is closed. */
  push(event: EventEnvelope): boolean {
    if (this.closing || this.ended) return false
    if (this.held) { this.held.push(event); return true }
    if (event.type !== 'text_delta' && this.sessionId !== null) {
      if (event.seq <= this.lastSeq) return true // already replayed: no duplicate at the seam
      this.lastSeq = event.seq
    }
    const last = this.queue[this.queue.length - 1]
    if (event.type === 'text_delta' && last?.kind === 'event' && last.event.type === 'text_delta' &&
        last.event.session_id === event.session_id && last.event.turn === event.turn) {
      last.event = { ...last.event, data: { text: (last.event.data as { text: string }).text + (event.data as { text: string }).text } }
      return true
    }
    if (this.queue.length >= this.limit) {
      this.closeWith({ type: 'stream_closed', session_id: this.sessionId, data: { reason: 'slow_consumer' } })
      return false
    }
    this.enqueue({ kind: 'event', event })
    return true
  }

  control(c: StreamControl): void {
    if (this.closing || this.ended) return
    this.enqueue({ kind: 'control', control: c })
  }

  /** Starts buffering live events while older ones are loaded from the log. */
  hold(): void { this.held = [] }

  /** Emits `replayed` (ascending seq), then what arrived meanwhile, skipping duplicates. */
  release(replayed: readonly EventEnvelope[]): void {
    const held = this.held ?? []
    this.held = null
    for (const e of replayed) this.push(e)
    for (const e of held) this.push(e)
  }

  /** Sends a final control frame, then ends the iteration once it is taken. */
  closeWith(c: StreamControl): void {
    if (this.closing || this.ended) return
    this.queue = [] // a dropped consumer gets the reason now, not after its backlog
    this.enqueue({ kind: 'control', control: c })
    this.closing = true
    this.onClose(this)
    for (const cb of this.endCallbacks.splice(0)) {
      try { cb() } catch { /* a transport callback must not break publishing */ }
    }
  }

  onEnd(cb: () => void): void {
    if (this.closing) { cb(); return }
    this.endCallbacks.push(cb)
  }

  close(): void {
    if (this.ended) return
    this.ended = true
    this.queue = []
    this.onClose(this)
    const w = this.waiter
    this.waiter = null
    w?.({ value: undefined, done: true })
    const done = this.onDone
    this.onDone = null
    done?.()
  }

  attach(write: (batch: StreamFrame[]) => boolean, onDone: () => void): { resume(): void } {
    this.writer = write
    this.onDone = onDone
    if (this.queue.length > 0 || this.closing) this.flush()
    return { resume: () => { this.paused = false; this.flush() } }
  }

  /** Push mode: hands everything queued to the writer; ends after a final frame. */
  private flush(): void {
    if (this.ended || !this.writer) return
    if (this.queue.length > 0 && !this.paused) {
      const ok = this.writer(this.takeAll())
      if (!ok) this.paused = true
    }
    if (this.closing && this.queue.length === 0) this.close()
  }

  get backlog(): number { return this.queue.length }

  private enqueue(f: StreamFrame): void {
    this.queue.push(f)
    // Wake the reader once, after the current burst: it takes the whole burst as one batch.
    if ((this.waiter || (this.writer && !this.paused)) && !this.wakeScheduled) {
      this.wakeScheduled = true
      this.schedule(this)
    }
  }

  /** Hands the reader everything queued (called by the scheduler). */
  wake(): void {
    this.wakeScheduled = false
    if (this.writer) { this.flush(); return }
    const w = this.waiter
    if (!w || this.queue.length === 0) return
    this.waiter = null
    w({ value: this.takeAll(), done: false })
  }

  private takeAll(): StreamFrame[] {
    const batch = this.queue
    this.queue = []
    return batch
  }

  [Symbol.asyncIterator](): AsyncIterator<StreamFrame[]> {
    return {
      next: () => {
        if (this.queue.length > 0) return Promise.resolve({ value: this.takeAll(), done: false })
        if (this.ended || this.closing) { this.close(); return Promise.resolve({ value: undefined, done: true }) }
        return new Promise((resolve) => { this.waiter = resolve })
      },
      return: () => { this.close(); return Promise.resolve({ value: undefined, done: true }) },
    }
  }
}
