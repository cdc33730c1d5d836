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

  /** Stored events after `from`, at most `limit`. */
  async page(id: string, from: number, limit: number): Promise<EventEnvelope[]> {
    const start = this.hub.bufferStart(id)
    if (start !== null && start <= from + 1) return this.hub.buffered(id, from).slice(0, limit)
    const stored = await this.log.readAfter(id, from, Infinity, limit)
    if (stored.length > 0) return stored
    return start === null ? [] : this.hub.buffered(id, from).slice(0, limit) // no log (ephemeral): what the buffer has
  }

  /** A subscription to a session's events after `after` (replayed from here, then live), up to `lastSeq` stored so far. */
  async subscribe(id: string, after: number | undefined, lastSeq: number): ReturnType<EventHub['subscribeSession']> {
    try {
      return await this.hub.subscribeSession(id, after, lastSeq, (from, limit) => this.page(id, from, limit))
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
