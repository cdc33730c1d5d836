import type { EventEnvelope } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { Discarded } from './session-reducer.js'

/** A session as a commit listener sees it. */
export interface CommittedSession {
  readonly id: string
  readonly tenant: string
  /**
   * The session's state now: it has applied every event committed so far, and maybe later ones
   * not yet durable. Not to be trusted once `broken` (a later commit failed: the store is the truth).
   */
  readonly record: SessionRecord
  readonly broken: boolean
}

/** One commit, as its listeners are told of it once it is durable. */
export interface CommittedBatch {
  readonly session: CommittedSession
  /** The events the commit stored, in seq order. */
  readonly events: readonly EventEnvelope[]
  /** What a compaction among these events took out of the history, when one did (memory indexes it). */
  readonly discarded?: Discarded | undefined
}

/**
 * Work that follows what sessions commit — the projection, the memory indexer — told of each
 * commit after the repository made it durable, in commit order per session. Listeners hold no
 * handle on the service: what they learn comes with the commit.
 */
export interface SessionListener {
  /** Must return at once and not throw: it runs on the commit's path (work goes to a queue). */
  committed(batch: CommittedBatch): void
  /** Told after a session was deleted, before the deletion is acknowledged. */
  deleted?(sessionId: string): Promise<void>
}
