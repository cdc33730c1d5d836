import type { EventEnvelope } from './events.js'
import type { SessionRecord } from './session-record.js'
import type { SessionQuery, SessionSummary, Page } from './wire.js'

/**
 * The per-session, append-only event log. Invariant: seqs are gapless from 1 per
 * session; `append` is all-or-nothing together with the snapshot it is given.
 */
export interface EventStore {
  /** Events with `after < seq`, in seq order, up to `limit`. */
  readAfter(sessionId: string, after: number, limit?: number): Promise<EventEnvelope[]>
  lastSeq(sessionId: string): Promise<number>
}

/** Session snapshots (derived from the log; a cache that can be rebuilt). */
export interface SessionStore {
  get(sessionId: string): Promise<SessionRecord | undefined>
  list(tenant: string, q: SessionQuery): Promise<Page<SessionSummary>>
}

/** What a durable backend offers the service: the log, the snapshots, and one atomic commit. */
export interface SessionRepository {
  readonly events: EventStore
  readonly sessions: SessionStore
  /** Appends `events` (consecutive seqs) and writes `snapshot` in one transaction. */
  commit(events: readonly EventEnvelope[], snapshot: SessionRecord): Promise<void>
  /** Purges a session's events, snapshot and idempotency records. */
  deleteSession(sessionId: string): Promise<void>
  close(): Promise<void>
}

/** A remembered outcome of an idempotent call. */
export interface IdempotencyRecord {
  fingerprint: string
  created_at: number
  outcome: { ok: true; value: unknown } | { ok: false; code: string; message: string; data?: Record<string, unknown> }
}

export interface IdempotencyStore {
  get(key: string): Promise<IdempotencyRecord | undefined>
  put(key: string, record: IdempotencyRecord): Promise<void>
  /** Drops records whose key starts with `prefix` (a deleted session's). */
  deletePrefix(prefix: string): Promise<void>
}
