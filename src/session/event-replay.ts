import { toBurrowError } from '../core/errors.js'
import type { EventEnvelope } from '../core/events.js'
import type { EventPage } from '../core/session-service.js'
import type { EventStore } from '../core/stores.js'
import type { EventHub } from './event-hub.js'

/**
 * A session's stored events for replays: from the hub's in-memory buffer when it reaches back
 * far enough (no read of the log), else from the repository's log; without a log (ephemeral
 * mode) whatever the buffer still has.
 */
export class EventReplay {
  constructor(
    private readonly hub: EventHub,
    private readonly log: EventStore,
  ) {}

  /**
   * Stored events after `from`, at most `limit`. The buffer answers when it holds them all: from
   * `from + 1` on, and up to `limit` of them or to the last seq the hub knows to be stored. On one
   * process that is where the buffer ends; with replicas the buffer can lag it — a session loaded
   * again from the store after another replica wrote it is ahead of what the change feed published here.
   */
  async page(id: string, from: number, limit: number): Promise<EventEnvelope[]> {
    const last = this.hub.knownSeq(id) ?? 0
    const start = this.hub.bufferStart(id)
    if (start !== null && start <= from + 1) {
      const buffered = this.hub.buffered(id, from).slice(0, limit)
      if (buffered.length >= limit || (buffered.at(-1)?.seq ?? from) >= last) return buffered
    }
    const stored = await this.log.readAfter(id, from, Infinity, limit)
    if (stored.length > 0) return stored
    return start === null ? [] : this.hub.buffered(id, from).slice(0, limit) // no log (ephemeral): what the buffer has
  }

  /**
   * A subscription to a session's events after `after` (replayed from here, then live), up to `lastSeq`
   * stored so far; without `after`, live from `start` when given (EventHub.subscribeSession).
   */
  async subscribe(id: string, after: number | undefined, lastSeq: number, start?: number): ReturnType<EventHub['subscribeSession']> {
    try {
      return await this.hub.subscribeSession(id, after, lastSeq, (from, limit) => this.page(id, from, limit), start)
    } catch (err) {
      throw toBurrowError(err)
    }
  }

  /** A page of stored events after `after`, saying whether some right after it are no longer kept. */
  async eventPage(id: string, after: number, limit: number, lastSeq: number): Promise<EventPage> {
    const events = await this.page(id, after, limit)
    return { events, truncated: after < lastSeq && (events[0]?.seq ?? lastSeq + 1) > after + 1, last_seq: lastSeq }
  }

  /** Stored events in `[first, last]` (a remembered turn's, replayed to its retry). */
  async range(id: string, first: number, last: number): Promise<EventEnvelope[]> {
    const start = this.hub.bufferStart(id)
    return start !== null && start <= first ? this.hub.buffered(id, first - 1, last) : this.log.readAfter(id, first - 1, last)
  }
}
