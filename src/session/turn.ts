import type { EventEnvelope } from '../core/events.js'
import type { ContentBlock, ToolResultInput } from '../core/messages.js'
import type { SessionRecord } from '../core/session-record.js'
import type { ModelSettings } from '../core/wire.js'
import type { TraceContext } from '../core/tracing.js'
import { Cancellation } from './cancellation.js'
import type { Receipt } from './idempotency.js'
import type { EventSink, LiveSession, PendingEvent, RunningWork, Seal } from './live-session.js'

/** How a turn begins (checked against the session by turn-requests.ts before anything is recorded). */
export type TurnStart = (
  | { kind: 'input'; input: ContentBlock[] }
  /** A new turn without new input: the model answers the history as it stands (resume after a crash). */
  | { kind: 'continue' }
  | { kind: 'tool_results'; results: ToolResultInput[] }
) & {
  /** The model settings the request gave (the session's defaults are not in it). */
  settings: ModelSettings
  /** What its LLM calls run with: the session's defaults, the paused turn's own when continuing, then the request's. */
  effective: ModelSettings
}

const NOT_STARTED: Promise<unknown> = Promise.resolve()

/**
 * One run of a turn on a session — or of a manual compaction, which records its events under
 * the session's current turn: the session, the turn's number, where this run's events begin,
 * how it is cancelled, and the caller's own stream. While it is the session's `running` work,
 * every event the session publishes reaches `sink` too.
 */
export class Turn implements RunningWork {
  /** The seq of this run's first event. */
  readonly firstSeq: number
  /** The seq of the turn's first event: earlier than `firstSeq` when this run continues a paused turn. */
  readonly startSeq: number
  /** Settles when the run has ended; set by whoever runs it. */
  done: Promise<unknown> = NOT_STARTED
  /**
   * The span this run's own spans (LLM calls, compactions, memory searches) are children of: the
   * caller's request span until the turn runner opens the turn's span. Explicit rather than
   * async context, since a run may outlive the request that started it.
   */
  trace: TraceContext | undefined = undefined

  constructor(
    readonly session: LiveSession,
    readonly number: number,
    readonly sink: EventSink | null = null,
    readonly signal: Cancellation = new Cancellation(),
    /** The request's Idempotency-Key: the run's last commit carries its outcome (idempotency.ts). */
    readonly receipt: Receipt | null = null,
  ) {
    const r = session.record
    this.firstSeq = r.last_seq + 1
    this.startSeq = r.open_turn?.turn === number ? r.open_turn.first_seq : this.firstSeq
  }

  /** The turn a request starts: the next one, or the paused one its tool results continue. */
  static starting(session: LiveSession, start: TurnStart, sink: EventSink | null, receipt: Receipt | null = null): Turn {
    const r = session.record
    return new Turn(session, start.kind === 'tool_results' ? r.open_turn!.turn : r.turn_count + 1, sink, undefined, receipt)
  }

  get record(): SessionRecord {
    return this.session.record
  }

  /** Records events of this turn (see LiveSession.emit). */
  emit(events: readonly PendingEvent[], seal?: Seal): EventEnvelope[] {
    return this.session.emit(this.number, events, seal)
  }

  /**
   * Records the run's last events and answers `answer(record after them)`: with a receipt, that
   * answer is committed with them as the request's outcome.
   */
  end<T>(events: readonly PendingEvent[], answer: () => T): T {
    let value!: T
    this.emit(events, () => {
      value = answer()
      return this.receipt?.seal({ ok: true, value })
    })
    return value
  }

  /** Streams a text delta of this turn (never stored). */
  delta(text: string): void {
    this.session.delta(this.number, text)
  }
}
