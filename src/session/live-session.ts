import type { EventData, EventEnvelope, EventType } from '../core/events.js'
import { isStoredEventType } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import { applyEvent } from './session-reducer.js'

export interface PendingEvent<T extends EventType = EventType> { type: T; data: EventData[T] }

/** Persists a batch of events with the record they produced (no-op when ephemeral). */
export type CommitFn = (events: readonly EventEnvelope[], record: SessionRecord) => Promise<void>

/** The running turn of a session (at most one). */
export interface RunningTurn { turn: number; controller: AbortController; done: Promise<unknown> }

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

  constructor(
    public record: SessionRecord,
    private readonly commit: CommitFn,
    private readonly publish: (e: EventEnvelope) => void,
    private readonly now: () => Date = () => new Date(),
  ) {}

  get id(): string { return this.record.session_id }
  get tenant(): string { return this.record.config.tenant }

  /**
   * Commits events in order (applied to the record, persisted, then published —
   * a subscriber never sees an event that is not durable). Calls are serialised.
   */
  emit(turn: number, events: readonly PendingEvent[]): Promise<EventEnvelope[]> {
    const run = this.tail.then(() => this.emitNow(turn, events))
    this.tail = run.catch(() => undefined)
    return run
  }

  /** A text delta: never stored, published at once with the seq of the last stored event. */
  delta(turn: number, text: string): void {
    const e: EventEnvelope<'text_delta'> = {
      seq: this.record.last_seq, session_id: this.id, turn, type: 'text_delta', at: this.now().toISOString(), data: { text },
    }
    this.deliver(e)
  }

  private async emitNow(turn: number, events: readonly PendingEvent[]): Promise<EventEnvelope[]> {
    if (this.broken) throw new Error(`session ${this.id} is out of sync with its log`)
    const at = this.now().toISOString()
    const out: EventEnvelope[] = []
    for (const p of events) {
      if (!isStoredEventType(p.type)) throw new Error('text_delta goes through delta()')
      const e = { seq: this.record.last_seq + 1, session_id: this.id, turn, type: p.type, at, data: p.data } as EventEnvelope
      this.record = applyEvent(this.record, e)
      out.push(e)
    }
    try {
      await this.commit(out, this.record)
    } catch (err) {
      this.broken = true
      throw err
    }
    this.lastActive = Date.now()
    for (const e of out) this.deliver(e)
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
