import type { EventData, EventEnvelope, EventType } from '../core/events.js'
import { isStoredEventType } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { Cancellation } from './cancellation.js'
import { applyEvent } from './session-reducer.js'

export interface PendingEvent<T extends EventType = EventType> { type: T; data: EventData[T] }

/** Persists a batch of events with the record they produced (returns nothing when there is nothing to wait for). */
export type CommitFn = (events: readonly EventEnvelope[], record: SessionRecord) => Promise<void> | void

/** The running turn of a session (at most one). */
export interface RunningTurn { turn: number; controller: Cancellation; done: Promise<unknown> }

/**
 * A session loaded in this process: its record (derived state), the running turn,
 * and the single ordered path through which its events are committed and published.
 */
export class LiveSession {
  running: RunningTurn | null = null
  /** Receives this session's events for the current call (the caller's own stream). */
  callSink: ((e: EventEnvelope) => void) | null = null
  lastActive = Date.now()
  /** Set when a commit failed: the in-memory record may be ahead of the log. */
  broken = false
  private tail: Promise<unknown> = Promise.resolve()
  private inFlight = 0
  /**
   * Publication of events that are committed but not yet durable (fsync durability):
   * everything published goes through this one chain, so subscribers see events in order
   * and only once they are on disk, while the turn itself goes on.
   */
  private gate: Promise<void> | null = null

  constructor(
    public record: SessionRecord,
    private readonly commit: CommitFn,
    private readonly publish: (e: EventEnvelope) => void,
    /** Whether anyone (a subscriber of this session or its tenant) is listening right now. */
    private readonly listened: () => boolean = () => true,
    /** Resolves once every commit so far is durable; absent when a commit is as durable as it gets. */
    private readonly durable?: () => Promise<void>,
    private readonly now: () => Date = () => new Date(),
  ) {}

  get id(): string { return this.record.session_id }
  get tenant(): string { return this.record.config.tenant }

  /**
   * Commits events in order (applied to the record, persisted, then published —
   * a subscriber never sees an event that is not durable). Calls are serialised.
   * Resolves once the batch is committed (synchronously when there is nothing to wait
   * for); `settled()` waits until it is also durable and published — what an
   * acknowledgement to the client must wait for.
   */
  emit(turn: number, events: readonly PendingEvent[]): EventEnvelope[] | Promise<EventEnvelope[]> {
    // Usually nothing is in flight and the batch starts at once; otherwise it queues behind.
    const run = this.inFlight === 0 ? this.emitNow(turn, events) : this.tail.then(() => this.emitNow(turn, events))
    if (!(run instanceof Promise)) return run
    this.inFlight++
    this.tail = run.then(() => { this.inFlight-- }, () => { this.inFlight-- })
    return run
  }

  /** A text delta: never stored, published at once with the seq of the last stored event. */
  delta(turn: number, text: string): void {
    if (!this.callSink && !this.listened()) return // deltas are never stored: without a listener there is nothing to do
    const e: EventEnvelope<'text_delta'> = {
      seq: this.record.last_seq, session_id: this.id, turn, type: 'text_delta', at: this.now().toISOString(), data: { text },
    }
    if (this.gate) this.chain(() => this.deliver(e))
    else this.deliver(e)
  }

  /** Resolves when every committed event is durable and published; rejects if a flush failed. */
  async settled(): Promise<void> {
    while (this.gate) await this.gate
    if (this.broken) throw new Error(`session ${this.id}: a commit could not be made durable`)
  }

  private chain(step: () => void | Promise<void>): void {
    const next: Promise<void> = (this.gate ?? Promise.resolve()).then(step).catch(() => { this.broken = true })
    this.gate = next
    void next.then(() => { if (this.gate === next) this.gate = null })
  }

  private emitNow(turn: number, events: readonly PendingEvent[]): EventEnvelope[] | Promise<EventEnvelope[]> {
    if (this.broken) throw new Error(`session ${this.id} is out of sync with its log`)
    const at = this.now().toISOString()
    const out: EventEnvelope[] = []
    for (const p of events) {
      if (!isStoredEventType(p.type)) throw new Error('text_delta goes through delta()')
      const e = { seq: this.record.last_seq + 1, session_id: this.id, turn, type: p.type, at, data: p.data } as EventEnvelope
      this.record = applyEvent(this.record, e)
      out.push(e)
    }
    let pending: Promise<void> | void
    try {
      pending = this.commit(out, this.record)
    } catch (err) {
      this.broken = true
      throw err
    }
    if (!pending) return this.committed(out)
    return pending.then(() => this.committed(out), (err: unknown) => { this.broken = true; throw err })
  }

  private committed(out: EventEnvelope[]): EventEnvelope[] {
    this.lastActive = Date.now()
    if (!this.durable) {
      for (const e of out) this.deliver(e)
      return out
    }
    // Waiting for the flush starts now (it covers this commit); publication follows it, in order.
    const flushed = this.durable()
    this.chain(async () => {
      await flushed
      for (const e of out) this.deliver(e)
    })
    return out
  }

  private deliver(e: EventEnvelope): void {
    this.publish(e)
    const sink = this.callSink
    if (sink) {
      try { sink(e) } catch { /* a caller's sink must not break the turn */ }
    }
  }
}
