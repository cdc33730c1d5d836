import type { Logger } from '../core/logger.js'
import type { SessionRecord } from '../core/session-record.js'
import type { SessionRepository } from '../core/stores.js'
import type { EventHub } from './event-hub.js'
import type { LiveSession } from './live-session.js'

/**
 * What the owner of sessions sees of the cache of live sessions (LiveSessions), given to it once,
 * when the cache is made: how to find, adopt and settle a session, and how to bring a cached one
 * up to the store.
 */
export interface SessionCache {
  readonly repository: SessionRepository
  readonly hub: EventHub
  readonly logger: Logger
  /** The caller's live session, loading it if needed (SESSION_NOT_FOUND for another tenant's). */
  get(tenant: string, id: string): LiveSession | Promise<LiveSession>
  /** Makes a stored record live here. */
  adopt(record: SessionRecord): LiveSession
  /** Waits until what the session committed is durable (rejects as the commit did). */
  settle(s: LiveSession): Promise<void>
  /** Replaces a cached record with the stored one, which another owner wrote past it. */
  reloaded(s: LiveSession, stored: SessionRecord): void
  /** The session was deleted by another owner: forgotten here, SESSION_NOT_FOUND thrown. */
  deletedElsewhere(s: LiveSession): never
}

/**
 * Session ownership: what differs between one process that owns every session of its store and
 * replicas sharing one (docs/architecture.md). The session core asks it, and nothing else, how to
 * own a session for work, what token its commits carry, whether a cached session is still current,
 * where a stream starts, and how to close the turns an owner that stopped left running.
 * `SoleOwner` (sole-owner.ts) is the one process; the leased owner lives with the replicas
 * (replicas/leased-owner.ts), which the session core never imports.
 */
export interface SessionOwnership {
  /** Whether other processes own sessions of the same store. */
  readonly shared: boolean
  /** Runs work that writes the session's log, owning the session meanwhile (SESSION_BUSY when another process does). */
  hold<T>(s: LiveSession, work: () => Promise<T>): Promise<T>
  /** The fencing token the session's commits carry (0: none). */
  fence(id: string): number
  /**
   * A cached session of the caller's, not running work here, checked for a read: loaded again when
   * another owner wrote past it.
   */
  current(s: LiveSession): LiveSession | Promise<LiveSession>
  /** Where a stream of the session without Last-Event-ID starts (undefined: at its first event). */
  streamStart(s: LiveSession): number | undefined
  /** Closes the turns left running by an owner that stopped; returns how many. At start-up, and periodically when shared. */
  recover(): Promise<number>
  /** The session is gone: nothing of it is kept. */
  forget(id: string): void
  /** Gives up what is kept after work (shutdown, before the store closes). */
  close(): Promise<void>
}

/** Makes the ownership of a cache (the cache hands itself over as it is made). */
export type Ownership = (cache: SessionCache) => SessionOwnership
