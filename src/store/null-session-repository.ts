import { BurrowError } from '../core/errors.js'
import type { EventEnvelope } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { EventStore, IdempotencyStore, IdempotencyWrite, ProjectionState, SessionRepository, SessionStore } from '../core/stores.js'
import type { Page, SessionSummary } from '../core/wire.js'
import { MemoryIdempotencyStore } from './memory-idempotency-store.js'

const refuse = (): never => {
  throw new BurrowError('SESSION_PERSISTENCE_DISABLED')
}

/**
 * The repository of ephemeral mode (`BURROW_SESSION_STORE=off`): sessions live only in the
 * service's live-session table. Commits are accepted and kept nowhere (there is nothing to
 * wait for, so events are published at once); lookups find nothing, so a session this process
 * does not hold is not found; every operation that needs stored sessions refuses with
 * `SESSION_PERSISTENCE_DISABLED`. Idempotency records live in process memory, so retries work.
 */
export class NullSessionRepository implements SessionRepository {
  readonly idempotency: IdempotencyStore

  constructor(idempotencyTtlMs: number) {
    this.idempotency = new MemoryIdempotencyStore(idempotencyTtlMs)
  }

  readonly events: EventStore = {
    readAfter: async (): Promise<EventEnvelope[]> => [],
    lastSeq: async (): Promise<number> => 0,
  }

  readonly sessions: SessionStore = {
    get: async (): Promise<SessionRecord | undefined> => undefined,
    tenantOf: async (): Promise<string | undefined> => undefined,
    list: async (): Promise<Page<SessionSummary>> => refuse(),
    runningTurns: async (): Promise<string[]> => [],
    allIds: (): AsyncIterable<string> => (async function* () {})(),
  }

  /** Nothing is stored, so nothing is projected: a projector has no business here. */
  readonly projection: ProjectionState = {
    checkpoint: async () => refuse(),
    projected: async () => refuse(),
    pending: async () => refuse(),
    reset: async () => refuse(),
  }

  /** Only the idempotency outcomes are kept (in process memory, as the rest of the session). */
  commit(_events: readonly EventEnvelope[], _snapshot: SessionRecord, _fence?: number, outcomes: readonly IdempotencyWrite[] = []): void {
    for (const o of outcomes) void this.idempotency.put(o.key, o.record)
  }
  requirePersistence(): never {
    return refuse()
  }
  /** Process memory never refuses a write. */
  writable(): boolean {
    return true
  }
  async deleteSession(_sessionId: string, _tenant: string): Promise<void> {
    refuse()
  }
  async close(): Promise<void> {}
}
