import { BurrowError, toBurrowError } from '../core/errors.js'
import type { EventData, EventEnvelope, EventType } from '../core/events.js'
import { isStoredEventType } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { IdempotencyWrite } from '../core/stores.js'
import type { Cancellation } from './cancellation.js'
import { TurnSlot } from './turn-slot.js'
import { applyEvent, discardedBy, type Discarded } from './session-reducer.js'

export interface PendingEvent<T extends EventType = EventType> {
  type: T
  data: EventData[T]
}

/** Receives events as they are published (a caller's own stream). */
export type EventSink = (e: EventEnvelope) => void

/**
 * Persists a batch of events a session emitted (its record has applied them), with what a
 * compaction among them took out of the history and the idempotency outcomes to commit with
 * them; resolves once they are durable (returns nothing when there is nothing to wait for).
 */
export type CommitFn = (
  events: readonly EventEnvelope[],
  session: LiveSession,
  discarded?: Discarded,
  outcomes?: readonly IdempotencyWrite[],
) => Promise<void> | void

/**
 * The outcome a request's last events commit with (idempotency.ts, Receipt), computed from the
 * session once they are applied: the answer is read from the record they produced.
 */
export type Seal = (session: LiveSession) => IdempotencyWrite | undefined

/** What runs on a session — a turn, or a manual compaction (the `Turn` of turn.ts): at most one at a time. */
export interface RunningWork {
  /** The turn its events belong to. */
  readonly number: number
  readonly signal: Cancellation
  /** The caller's own stream: while this runs, every event the session publishes goes there too. */
  readonly sink: EventSink | null
  /** Settles when the work has ended. */
  readonly done: Promise<unknown>
}

/**
 * A session loaded in this process: its record (derived state), what runs on it,
 * and the single ordered path through which its events are committed and published.
 */
export class LiveSession {
  running: RunningWork | null = null
  /**
   * Turns that ended here whose events are not all durable yet. A turn gives up the session's slot
   * at its last event, so a queued turn starts at once; the session still reads as running until
   * the ended turn's events can be listed.
   */
  settling = 0

  /** What the session's view says: work runs, or an ended turn's events are still being made durable. */
  get active(): boolean {
    return this.running !== null || this.settling > 0
  }
  /** Held by whatever runs on the session here, and the line of turns waiting for it (turn-slot.ts). */
  readonly slot = new TurnSlot()
  lastActive = Date.now()
  /**
   * Set when a commit failed: the in-memory record may be ahead of the log. The live-session table
   * then drops this object and loads the session again from the store (what is stored is the truth).
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

  get id(): string {
    return this.record.session_id
  }
  get tenant(): string {
    return this.record.config.tenant
  }

  /**
   * Applies events to the record and hands them to the store, in order; returns them at once.
   * The store may write them later, together with the session's next events (group commit):
   * nothing waits for that but what must — publication (a subscriber never sees an event that
   * is not stored) and acknowledgements, which wait for `settled()`. A failed commit breaks the
   * session (its record is ahead of the log) and makes `settled()` reject. `seal` gives the
   * idempotency outcome the events are committed with.
   */
  emit(turn: number, events: readonly PendingEvent[], seal?: Seal): EventEnvelope[] {
    if (this.broken) throw this.failed()
    const at = this.now().toISOString()
    const out: EventEnvelope[] = []
    let discarded: Discarded | undefined
    for (const p of events) {
      if (!isStoredEventType(p.type)) throw new Error('text_delta goes through delta()')
      const e = { seq: this.record.last_seq + 1, session_id: this.id, turn, type: p.type, at, data: p.data } as EventEnvelope
      // Taken before the event is applied: the record is changed in place.
      if (e.type === 'compaction_completed') discarded = discardedBy(this.record, e as EventEnvelope<'compaction_completed'>)
      this.record = applyEvent(this.record, e)
      out.push(e)
    }
    let pending: Promise<void> | void
    try {
      const outcome = seal?.(this)
      pending = this.commit(out, this, discarded, outcome ? [outcome] : undefined)
    } catch (err) {
      this.break(err)
      throw this.failed()
    }
    this.lastActive = Date.now()
    // The caller of the work that emits them gets them, even when other work runs by the time they are published.
    const sink = this.running?.sink ?? null
    if (!pending && !this.gate) {
      for (const e of out) this.deliver(e, sink)
      return out
    }
    this.chain(async () => {
      await pending
      for (const e of out) this.deliver(e, sink)
    })
    return out
  }

  /** Whether anyone watches this session's events live: the running work's caller, or a subscriber. */
  watched(): boolean {
    return (this.running !== null && this.running.sink !== null) || this.listened()
  }

  /** A text delta: never stored, published at once with the seq of the last stored event. */
  delta(turn: number, text: string): void {
    if (!this.watched()) return // deltas are never stored: without a listener there is nothing to do
    const e: EventEnvelope<'text_delta'> = {
      seq: this.record.last_seq,
      session_id: this.id,
      turn,
      type: 'text_delta',
      at: this.now().toISOString(),
      data: { text },
    }
    const sink = this.running?.sink ?? null
    if (this.gate) this.chain(() => this.deliver(e, sink))
    else this.deliver(e, sink)
  }

  /** Resolves when every event emitted so far is durable and published; rejects with the commit's error (`STORE_UNAVAILABLE` on a full disk) if one could not be stored. */
  async settled(): Promise<void> {
    while (this.gate) await this.gate
    if (this.broken) throw this.failed()
  }

  /** As {@link settled}, for the events emitted until now only: events emitted while it waits are not waited for. */
  async settledSoFar(): Promise<void> {
    if (this.gate) await this.gate
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
    void next.then(() => {
      if (this.gate === next) this.gate = null
    })
  }

  private deliver(e: EventEnvelope, sink: ((e: EventEnvelope) => void) | null): void {
    this.publish(e)
    if (sink) {
      try {
        sink(e)
      } catch {
        /* a caller's sink must not break the turn */
      }
    }
  }
}
