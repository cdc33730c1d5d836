import { BurrowError, toBurrowError } from '../core/errors.js'
import type { EventData, EventEnvelope, EventType } from '../core/events.js'
import { isStoredEventType } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { Cancellation } from './cancellation.js'
import { applyEvent } from './session-reducer.js'

export interface PendingEvent<T extends EventType = EventType> { type: T; data: EventData[T] }

/** Persists a batch of events with the record they produced; resolves once they are durable (returns nothing when there is nothing to wait for). */
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
  /**
   * Set when a commit failed: the in-memory record may be ahead of the log. The service then
   * drops this object and loads the session again from the store (what is stored is the truth).
   */
  broken = false
  /** Why: the failed commit's error (`STORE_UNAVAILABLE` when the store could not write; INTERNAL for a conflict with the log). */
  private failure: BurrowError | null = null
  /**
   * Publication of events that are not yet committed or durable: everything published goes
   * through this one chain, so subscribers see events in order and only once they are stored
   * (and on disk, with fsync durability), while the turn itself goes on.
   */
  private gate: Promise<void> | null = null

  constructor(
    public record: SessionRecord,
    private readonly commit: CommitFn,
    private readonly publish: (e: EventEnvelope) => void,
    /** Whether anyone (a subscriber of this session or its tenant) is listening right now. */
    private readonly listened: () => boolean = () => true,
    private readonly now: () => Date = () => new Date(),
  ) {}

  get id(): string { return this.record.session_id }
  get tenant(): string { return this.record.config.tenant }

  /**
   * Applies events to the record and hands them to the store, in order; returns them at once.
   * The store may write them later, together with the session's next events (group commit):
   * nothing waits for that but what must — publication (a subscriber never sees an event that
   * is not stored) and acknowledgements, which wait for `settled()`. A failed commit breaks the
   * session (its record is ahead of the log) and makes `settled()` reject.
   */
  emit(turn: number, events: readonly PendingEvent[]): EventEnvelope[] {
    if (this.broken) throw this.failed()
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
      this.break(err)
      throw this.failed()
    }
    this.lastActive = Date.now()
    if (!pending && !this.gate) {
      for (const e of out) this.deliver(e)
      return out
    }
    this.chain(async () => {
      await pending
      for (const e of out) this.deliver(e)
    })
    return out
  }

  /** Whether anyone watches this session's events live: the current call's own stream, or a subscriber. */
  watched(): boolean {
    return this.callSink !== null || this.listened()
  }

  /** A text delta: never stored, published at once with the seq of the last stored event. */
  delta(turn: number, text: string): void {
    if (!this.watched()) return // deltas are never stored: without a listener there is nothing to do
    const e: EventEnvelope<'text_delta'> = {
      seq: this.record.last_seq, session_id: this.id, turn, type: 'text_delta', at: this.now().toISOString(), data: { text },
    }
    if (this.gate) this.chain(() => this.deliver(e))
    else this.deliver(e)
  }

  /** Resolves when every event emitted so far is durable and published; rejects with the commit's error (`STORE_UNAVAILABLE` on a full disk) if one could not be stored. */
  async settled(): Promise<void> {
    while (this.gate) await this.gate
    if (this.broken) throw this.failed()
  }

  private break(err: unknown): void {
    this.broken = true
    this.failure ??= toBurrowError(err)
  }

  private failed(): BurrowError {
    return this.failure ?? new BurrowError('INTERNAL')
  }

  private chain(step: () => void | Promise<void>): void {
    const next: Promise<void> = (this.gate ?? Promise.resolve()).then(step).catch((err: unknown) => this.break(err))
    this.gate = next
    void next.then(() => { if (this.gate === next) this.gate = null })
  }

  private deliver(e: EventEnvelope): void {
    this.publish(e)
    const sink = this.callSink
    if (sink) {
      try { sink(e) } catch { /* a caller's sink must not break the turn */ }
    }
  }
}
