import { BurrowError, toBurrowError } from '../core/errors.js'
import { isSessionId } from '../core/ids.js'
import type { Logger } from '../core/logger.js'
import type { EventEnvelope } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { StreamControl } from '../core/session-service.js'
import type { SessionRepository } from '../core/stores.js'
import type { EventHub } from './event-hub.js'
import { LiveSession, type CommitFn, type RunningWork, type Seal } from './live-session.js'
import type { CommittedBatch, SessionListener } from './session-listener.js'
import type { Ownership, SessionCache, SessionOwnership } from './session-ownership.js'
import { applyEvent } from './session-reducer.js'
import { soleOwner } from './sole-owner.js'

export interface LiveSessionsOptions {
  repository: SessionRepository
  hub: EventHub
  /** Told of every commit once it is durable (the projector, the memory indexer). */
  listeners?: readonly SessionListener[]
  /** Live sessions kept in memory; the least recently used idle ones are evicted. */
  maxLive: number
  logger: Logger
  /** Who owns the sessions: this process alone (the default), or replicas sharing the store (replicas/leased-owner.ts). */
  ownership?: Ownership
}

/**
 * The sessions loaded in this process: found (or loaded from the repository) by tenant and id,
 * adopted when created or recovered after a crash, evicted when idle and too many, and settled —
 * waited on until what they committed is durable. Every live session commits through one path:
 * the repository, then the listeners. Who owns a session, and what owning it takes, is the
 * ownership's (session-ownership.ts): the cache asks it and knows nothing of leases.
 */
export class LiveSessions implements SessionCache {
  private readonly live = new Map<string, LiveSession>()
  readonly repository: SessionRepository
  readonly hub: EventHub
  readonly logger: Logger
  private readonly listeners: readonly SessionListener[]
  private readonly commit: CommitFn
  private readonly owner: SessionOwnership

  constructor(private readonly opts: LiveSessionsOptions) {
    this.repository = opts.repository
    this.hub = opts.hub
    this.logger = opts.logger
    this.listeners = opts.listeners ?? []
    this.owner = (opts.ownership ?? soleOwner)(this)
    this.commit =
      this.listeners.length === 0
        ? (events, s, _discarded, outcomes) => this.repository.commit(events, s.record, this.owner.fence(s.id), outcomes)
        : this.commitAndTell
  }

  /** Whether sessions are leased (other processes own sessions of the same store). */
  get leased(): boolean {
    return this.owner.shared
  }

  /**
   * Runs work that writes the session's log, owning the session meanwhile: with leases, holding
   * its lease (SESSION_BUSY while another replica holds it), after bringing the cached record up to
   * the store and closing a turn nobody runs any more. Alone: just the work.
   */
  exclusive<T>(s: LiveSession, work: () => Promise<T>): Promise<T> {
    return this.owner.hold(s, work)
  }

  /** Gives up what the ownership keeps after work (shutdown, before the store closes). */
  async close(): Promise<void> {
    await this.owner.close()
  }

  /** The caller's live session, loading it if needed; another tenant's is not found. */
  get(tenant: string, id: string): LiveSession | Promise<LiveSession> {
    const s = this.live.get(id)
    // The common case — a live, healthy session of this tenant — answers without a promise.
    if (s && s.tenant === tenant && !s.broken) {
      s.lastActive = Date.now()
      return s
    }
    return this.load(tenant, id)
  }

  /**
   * The caller's live session for a read (a view, an event page, a stream, notes). With a store
   * several processes share, a cached session is first checked against the stored last seq (one
   * indexed query) and loaded again when another replica wrote past it, so a read shows every turn
   * acknowledged anywhere before it. Not while work runs on it here: that work revalidated under the
   * session's lease, so nobody else writes and the live record is ahead of the store or equal to it.
   * Without leases this process is the only writer: the cache is the truth, and nothing is read.
   */
  current(tenant: string, id: string): LiveSession | Promise<LiveSession> {
    const s = this.live.get(id)
    if (!s || s.tenant !== tenant || s.broken || s.running) return this.get(tenant, id)
    s.lastActive = Date.now()
    return this.owner.current(s)
  }

  /** Where a stream of the session without Last-Event-ID stands when it begins, for a session `current` returned (the ownership's). */
  streamStart(s: LiveSession): number | undefined {
    return this.owner.streamStart(s)
  }

  /** Another replica deleted the session: it goes from memory too, its subscribers told why. */
  deletedElsewhere(s: LiveSession): never {
    if (this.live.get(s.id) === s) this.forget(s.id, { type: 'stream_closed', session_id: s.id, data: { reason: 'session_deleted' } })
    throw new BurrowError('SESSION_NOT_FOUND', `Session ${s.id} not found.`)
  }

  /**
   * Replaces a cached record with the stored one another replica wrote past it. The subscribers of
   * the session stay: each knows the last seq it delivered and reads what it misses from the log
   * (Subscription.fillGapsFrom); only the hub's replay buffer, which misses those events, starts afresh.
   */
  reloaded(s: LiveSession, stored: SessionRecord): void {
    this.hub.reloaded(s.id, stored.last_seq)
    s.record = stored
  }

  /**
   * A new session: its `session_created` is committed (with the outcome `seal` gives, and the
   * listeners told), then it is live. Not yet published.
   */
  async create(event: EventEnvelope<'session_created'>, seal?: Seal): Promise<LiveSession> {
    const s = this.make(applyEvent(undefined, event))
    await this.commitNew([event], s, seal)
    return this.admit(s)
  }

  /**
   * A new session made whole from its first events (a fork: `session_created` and the copied
   * log), committed as one write, then live. Not yet published; compactions in it index nothing
   * (what they discarded is the source's, indexed there).
   */
  async createFrom(events: readonly EventEnvelope[], seal?: Seal): Promise<LiveSession> {
    let record: SessionRecord | undefined
    for (const e of events) record = applyEvent(record, e)
    const s = this.make(record!)
    await this.commitNew(events, s, seal)
    return this.admit(s)
  }

  private async commitNew(events: readonly EventEnvelope[], s: LiveSession, seal?: Seal): Promise<void> {
    const outcome = seal?.(s)
    await this.commit(events, s, undefined, outcome ? [outcome] : undefined)
  }

  /** Makes a stored record live in this process (one recovered at start-up). */
  adopt(record: SessionRecord): LiveSession {
    return this.admit(this.make(record))
  }

  private make(record: SessionRecord): LiveSession {
    const id = record.session_id
    return new LiveSession(
      record,
      this.commit,
      (e) => this.hub.publish(e),
      () => this.hub.hasListeners(id),
    )
  }

  private admit(s: LiveSession): LiveSession {
    this.live.set(s.id, s)
    this.hub.open(s.id, s.tenant)
    this.evictIdle()
    return s
  }

  /** Drops a session from memory (evicted, broken or deleted); its subscribers get `control` and end. */
  forget(id: string, control?: StreamControl): void {
    this.live.delete(id)
    this.hub.drop(id, control)
  }

  /**
   * Waits until the session's committed events are durable (an acknowledgement); STORE_UNAVAILABLE if the store could not write them (also when another replica took the session over: reason `lease_lost`), INTERNAL for a conflict.
   * `so-far`: only the events emitted until now, not those that work started meanwhile emits (a queued turn's).
   */
  async settle(session: LiveSession, scope: 'all' | 'so-far' = 'all'): Promise<void> {
    try {
      await (scope === 'all' ? session.settled() : session.settledSoFar())
    } catch (err) {
      const e = toBurrowError(err)
      if (e.data?.reason === 'lease_lost')
        this.logger.warn({ session_id: session.id }, 'lost the lease of a session to another replica: its events were refused')
      else if (e.code === 'STORE_UNAVAILABLE') this.logger.warn({ err: e, session_id: session.id }, 'events could not be made durable')
      else this.logger.error({ err: e.cause ?? err, session_id: session.id }, 'events could not be stored')
      throw e
    }
  }

  /** Closes the turns an owner that stopped left running (the ownership's: see SoleOwner, LeasedOwner); returns how many. */
  recover(): Promise<number> {
    return this.owner.recover()
  }

  /** Turn requests waiting for a session here (`on_busy: queue`), all sessions together. */
  queuedTurns(): number {
    let n = 0
    for (const s of this.live.values()) n += s.slot.queued
    return n
  }

  /** What runs on the live sessions now (turns and manual compactions). */
  running(): RunningWork[] {
    return [...this.live.values()].flatMap((s) => (s.running ? [s.running] : []))
  }

  /** Another replica said it deleted the session: its streams here end, and nothing of it is kept (its listeners ran there). */
  deletedRemotely(id: string): void {
    this.forget(id, { type: 'stream_closed', session_id: id, data: { reason: 'session_deleted' } })
    this.owner.forget(id)
  }

  /** Tells the listeners that a session was deleted (after the repository purged it). */
  async deleted(id: string): Promise<void> {
    this.owner.forget(id)
    for (const l of this.listeners) await l.deleted?.(id)
  }

  private async load(tenant: string, id: string): Promise<LiveSession> {
    if (!isSessionId(id)) throw new BurrowError('SESSION_NOT_FOUND', `Session ${String(id).slice(0, 64)} not found.`)
    let s = this.live.get(id)
    if (!s) {
      const record = await this.stored(id, tenant)
      if (record) s = this.live.get(id) ?? this.adopt(record)
    }
    if (!s || s.tenant !== tenant) throw new BurrowError('SESSION_NOT_FOUND', `Session ${id} not found.`)
    if (s.broken) {
      // Loaded again from the store, which may hold what this process never saw (its buffered events
      // would have a gap): the channel goes too, and its subscribers end (they resume by Last-Event-ID).
      this.forget(id)
      return this.get(tenant, id)
    }
    s.lastActive = Date.now()
    return s
  }

  /** The tenant is checked before the record is read, so another tenant's session costs what an unknown id costs. */
  private async stored(id: string, tenant: string): Promise<SessionRecord | undefined> {
    if ((await this.repository.sessions.tenantOf(id)) !== tenant) return undefined
    return this.repository.sessions.get(id)
  }

  private evictIdle(): void {
    if (this.live.size <= this.opts.maxLive) return
    const idle = [...this.live.values()]
      .filter((s) => !s.running && !s.record.open_turn && this.hub.subscriberCount(s.id) === 0)
      .sort((a, b) => a.lastActive - b.lastActive)
    for (const s of idle) {
      if (this.live.size <= this.opts.maxLive) break
      this.logger.debug({ session_id: s.id }, 'evicting idle session from memory')
      this.forget(s.id)
    }
  }

  /** The commit path with listeners: they are told once the repository made the events durable. */
  private readonly commitAndTell: CommitFn = (events, session, discarded, outcomes) => {
    const batch: CommittedBatch = { session, events, discarded }
    const done = this.repository.commit(events, session.record, this.owner.fence(session.id), outcomes)
    if (!done) {
      this.tell(batch)
      return
    }
    return done.then(() => this.tell(batch))
  }

  private tell(batch: CommittedBatch): void {
    for (const l of this.listeners) {
      try {
        l.committed(batch)
      } catch (err) {
        // A listener's failure is its own: the events are stored, and the session goes on.
        this.logger.error({ err, session_id: batch.session.id }, 'a commit listener failed')
      }
    }
  }
}
