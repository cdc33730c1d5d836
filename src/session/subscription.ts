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
  /** Live events published while a replay runs; merged after it (see `replay`). */
  private held: EventEnvelope[] | null = null
  /** Too many live events arrived during a replay: they are read from the log instead. */
  private heldOverflow = false
  /** Resolves the replay loop's wait for the reader to take what was queued. */
  private drainWaiter: (() => void) | null = null
  private lastSeq = 0
  /** A tenant stream fed from the journal (tenant-feed.ts): the hub hands it text deltas only. */
  deltasOnly = false
  /** Whether `lastSeq` says where this subscriber stands, so a live event past `lastSeq + 1` is a gap. */
  private positioned = false
  /** Reads stored events after a seq (a session's log), to fill a gap in what arrives live. */
  private loader: { load: (after: number, limit: number) => Promise<EventEnvelope[]>; pageSize: number } | null = null
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
    if (this.held) {
      // While replaying: keep live stored events (bounded; past the bound they are re-read from the log).
      if (event.type === 'text_delta') return true
      if (this.held.length < this.limit) this.held.push(event)
      else this.heldOverflow = true
      return true
    }
    if (event.type !== 'text_delta' && this.sessionId !== null) {
      if (event.seq <= this.lastSeq) return true // already replayed: no duplicate at the seam
      if (this.positioned && this.loader && event.seq > this.lastSeq + 1) {
        // Events committed elsewhere (another replica) reached this process out of reach of its
        // feed, or before this stream was positioned: what is missing comes from the log first.
        const { load, pageSize } = this.loader
        this.held = [event]
        void this.runReplay(load, [], pageSize).catch(() => this.close())
        return true
      }
      this.lastSeq = event.seq
      this.positioned = true
    }
    const last = this.queue[this.queue.length - 1]
    if (
      event.type === 'text_delta' &&
      last?.kind === 'event' &&
      last.event.type === 'text_delta' &&
      last.event.session_id === event.session_id &&
      last.event.turn === event.turn
    ) {
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

  /**
   * A stored event of the tenant stream, with its stream id (its journal position; null: a frame
   * without one, see streamPosition): delivered in journal order by the tenant feed, never merged
   * or checked against a session's seq.
   */
  pushAt(event: EventEnvelope, id: number | null): boolean {
    if (this.closing || this.ended) return false
    if (this.queue.length >= this.limit) {
      this.closeWith({ type: 'stream_closed', session_id: this.sessionId, data: { reason: 'slow_consumer' } })
      return false
    }
    this.enqueue({ kind: 'event', event, id })
    return true
  }

  /**
   * Where a session's stored events can be read, so a gap in the live events is filled from the
   * log; `after` (a Last-Event-ID) is where the subscriber stands. Without one, the first live
   * event positions it.
   */
  fillGapsFrom(load: (after: number, limit: number) => Promise<EventEnvelope[]>, pageSize: number, after: number | undefined): void {
    this.loader = { load, pageSize }
    if (after !== undefined) {
      this.lastSeq = after
      this.positioned = true
    }
  }

  control(c: StreamControl): void {
    if (this.closing || this.ended) return
    this.enqueue({ kind: 'control', control: c })
  }

  /**
   * Replays stored events after `after`, a page at a time as the reader takes them (so a
   * long replay is never held against the live queue's limit), then merges the live events
   * that arrived meanwhile and goes live — no gap, no duplicate at the seam. `first` is the
   * first page, already loaded by the caller.
   */
  replay(
    load: (after: number, limit: number) => Promise<EventEnvelope[]>,
    first: readonly EventEnvelope[],
    pageSize: number,
  ): Promise<void> {
    this.held = []
    return this.runReplay(load, first, pageSize).catch(() => this.close())
  }

  private async runReplay(
    load: (after: number, limit: number) => Promise<EventEnvelope[]>,
    first: readonly EventEnvelope[],
    pageSize: number,
  ): Promise<void> {
    let page = first
    for (;;) {
      for (const e of page) {
        if (e.seq <= this.lastSeq) continue
        this.lastSeq = e.seq
        this.positioned = true
        this.enqueue({ kind: 'event', event: e })
      }
      await this.drained()
      if (this.ended || this.closing) return
      if (page.length >= pageSize) {
        page = await load(this.lastSeq, pageSize)
        continue
      }
      // Caught up with the log as it was read: the live events held meanwhile follow.
      const held = (this.held ?? []).filter((e) => e.seq > this.lastSeq)
      if (this.heldOverflow || (held.length > 0 && held[0]!.seq !== this.lastSeq + 1)) {
        this.held = held
        this.heldOverflow = false
        page = await load(this.lastSeq, pageSize)
        if (page.length > 0) continue
        // The log has nothing to fill the gap with (not stored where this process reads): go on from what is held.
        if (held.length > 0 && held[0]!.seq !== this.lastSeq + 1) this.positioned = false
      }
      this.held = null
      for (const e of held) this.push(e)
      return
    }
  }

  /** Resolves when everything queued has been handed to the reader (and a paused writer resumed). */
  drained(): Promise<void> {
    if (this.ended || this.closing || (this.queue.length === 0 && !this.paused)) return Promise.resolve()
    return new Promise((resolve) => {
      this.drainWaiter = resolve
    })
  }

  private checkDrained(): void {
    if (this.drainWaiter && this.queue.length === 0 && !this.paused) {
      const w = this.drainWaiter
      this.drainWaiter = null
      w()
    }
  }

  /** Sends a final control frame, then ends the iteration once it is taken. */
  closeWith(c: StreamControl): void {
    if (this.closing || this.ended) return
    this.queue = [] // a dropped consumer gets the reason now, not after its backlog
    this.enqueue({ kind: 'control', control: c })
    this.closing = true
    this.onClose(this)
    for (const cb of this.endCallbacks.splice(0)) {
      try {
        cb()
      } catch {
        /* a transport callback must not break publishing */
      }
    }
  }

  onEnd(cb: () => void): void {
    if (this.closing) {
      cb()
      return
    }
    this.endCallbacks.push(cb)
  }

  close(): void {
    if (this.ended) return
    this.ended = true
    this.queue = []
    this.onClose(this)
    const d = this.drainWaiter
    this.drainWaiter = null
    d?.()
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
    return {
      resume: () => {
        this.paused = false
        this.flush()
        this.checkDrained()
      },
    }
  }

  /** Push mode: hands everything queued to the writer; ends after a final frame. */
  private flush(): void {
    if (this.ended || !this.writer) return
    if (this.queue.length > 0 && !this.paused) {
      const batch = this.queue
      this.queue = []
      const ok = this.writer(batch)
      if (!ok) this.paused = true
      else this.checkDrained()
    }
    if (this.closing && this.queue.length === 0) this.close()
  }

  get backlog(): number {
    return this.queue.length
  }

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
    if (this.writer) {
      this.flush()
      return
    }
    const w = this.waiter
    if (!w || this.queue.length === 0) return
    this.waiter = null
    w({ value: this.takeAll(), done: false })
  }

  private takeAll(): StreamFrame[] {
    const batch = this.queue
    this.queue = []
    queueMicrotask(() => this.checkDrained())
    return batch
  }

  [Symbol.asyncIterator](): AsyncIterator<StreamFrame[]> {
    return {
      next: () => {
        if (this.queue.length > 0) return Promise.resolve({ value: this.takeAll(), done: false })
        if (this.ended || this.closing) {
          this.close()
          return Promise.resolve({ value: undefined, done: true })
        }
        return new Promise((resolve) => {
          this.waiter = resolve
        })
      },
      return: () => {
        this.close()
        return Promise.resolve({ value: undefined, done: true })
      },
    }
  }
}
