import { BurrowError, toBurrowError } from '../core/errors.js'
import { isSessionId } from '../core/ids.js'
import type { Logger } from '../core/logger.js'
import type { EventEnvelope } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { StreamControl } from '../core/session-service.js'
import type { SessionLease, SessionRepository } from '../core/stores.js'
import { closeAbandonedTurn, closeOpenTurn } from './close-turn.js'
import type { EventHub } from './event-hub.js'
import { LeaseKeeper, type LetGo } from './lease-keeper.js'
import { LiveSession, type CommitFn, type RunningWork, type Seal } from './live-session.js'
import type { CommittedBatch, SessionListener } from './session-listener.js'
import { applyEvent } from './session-reducer.js'

export interface LiveSessionsOptions {
  repository: SessionRepository
  hub: EventHub
  /** Told of every commit once it is durable (the projector, the memory indexer). */
  listeners?: readonly SessionListener[]
  /** Live sessions kept in memory; the least recently used idle ones are evicted. */
  maxLive: number
  logger: Logger
  /** With leases: how long a session's lease is kept after its work, for the next (0: released at once). */
  leaseLingerMs?: number
}

/**
 * The sessions loaded in this process: found (or loaded from the repository) by tenant and
 * id, adopted when created or recovered after a crash, evicted when idle and too many, and
 * settled — waited on until what they committed is durable. Every live session commits through one path: the
 * repository, then the listeners.
 */
export class LiveSessions {
  private readonly live = new Map<string, LiveSession>()
  private readonly repo: SessionRepository
  private readonly hub: EventHub
  private readonly listeners: readonly SessionListener[]
  private readonly commit: CommitFn
  /** Present when the store is shared by several processes (it has leases). */
  private readonly keeper: LeaseKeeper | null

  constructor(private readonly opts: LiveSessionsOptions) {
    this.repo = opts.repository
    this.hub = opts.hub
    this.listeners = opts.listeners ?? []
    const leases = opts.repository.leases
    this.keeper = leases ? new LeaseKeeper(leases, opts.logger, opts.leaseLingerMs ?? 0) : null
    this.commit =
      this.listeners.length === 0
        ? (events, s, _discarded, outcomes) => this.repo.commit(events, s.record, this.fence(s.id), outcomes)
        : this.commitAndTell
  }

  /** Whether sessions are leased (the store is shared by several processes). */
  get leased(): boolean {
    return this.keeper !== null
  }

  /**
   * Runs work that writes the session's log. With leases: holding the session's lease
   * (SESSION_BUSY while another replica holds it), after reloading the cached record if the
   * stored log has moved past it, and after closing a turn the log says is running that nobody
   * runs (its replica died: as crash recovery closes one). Without: just the work.
   */
  exclusive<T>(s: LiveSession, work: () => Promise<T>): Promise<T> {
    if (!this.keeper) return work()
    return this.keeper.hold(s, (lease, heldBefore) => this.revalidate(s, lease, heldBefore), work)
  }

  /** With leases: how this process asks another replica for a session's lease it keeps after its work (the replicas' link). */
  askToLetGo(letGo: LetGo): void {
    if (this.keeper) this.keeper.letGo = letGo
  }

  /** Another replica asks for the session's lease: see LeaseKeeper.giveUp. */
  giveUp(id: string): Promise<boolean | null> {
    return this.keeper ? this.keeper.giveUp(id) : Promise.resolve(null)
  }

  /** Releases the leases kept after their work (shutdown, before the store closes). */
  async close(): Promise<void> {
    await this.keeper?.close()
  }

  private fence(id: string): number {
    return this.keeper?.tokenOf(id) ?? 0
  }

  private async revalidate(s: LiveSession, lease: SessionLease, heldBefore: boolean): Promise<void> {
    await s.settled().catch(() => undefined)
    if (lease.lastSeq !== s.record.last_seq) {
      const stored = await this.repo.sessions.get(s.id)
      if (!stored) throw new BurrowError('SESSION_NOT_FOUND', `Session ${s.id} not found.`)
      this.reloaded(s, stored)
    }
    if (s.running || s.record.open_turn?.state !== 'running') return
    // Run here under the previous lease: its events stopped reaching the store (closeAbandonedTurn). Else its replica died.
    if (heldBefore) await closeAbandonedTurn(s)
    else {
      await closeOpenTurn(s, 'INTERRUPTED', 'The replica running this turn stopped.', 'process_restarted')
      this.opts.logger.warn({ session_id: s.id, previous_owner: lease.previousOwner }, 'closed a turn whose replica stopped')
    }
    await this.settle(s)
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
    if (!this.keeper || !s || s.tenant !== tenant || s.broken || s.running) return this.get(tenant, id)
    return this.checked(s)
  }

  private async checked(s: LiveSession): Promise<LiveSession> {
    const last = await this.repo.events.lastSeq(s.id)
    if (last === 0) return this.deletedElsewhere(s)
    if (last > s.record.last_seq) {
      const stored = await this.repo.sessions.get(s.id)
      if (!stored) return this.deletedElsewhere(s)
      // Work that began here meanwhile revalidates by itself, and a concurrent reload may have gone
      // further: the record only ever moves forward, and never under running work.
      if (!s.running && stored.last_seq > s.record.last_seq) this.reloaded(s, stored)
    }
    s.lastActive = Date.now()
    return s
  }

  /**
   * Where a stream of the session without Last-Event-ID stands when it begins, for a session `current`
   * returned: with leases and no work running here, the last seq stored (or published here, when that
   * is behind), so events other replicas commit after it reach the stream even when this replica's
   * own next event comes first (they are read from the log). Otherwise undefined: its first event
   * positions it (work here publishes in order, and nothing else writes the session meanwhile).
   */
  streamStart(s: LiveSession): number | undefined {
    if (!this.keeper || s.running) return undefined
    return Math.min(s.record.last_seq, this.hub.publishedSeq(s.id) ?? Infinity)
  }

  /** Another replica deleted the session: it goes from memory too, its subscribers told why. */
  private deletedElsewhere(s: LiveSession): never {
    if (this.live.get(s.id) === s) this.forget(s.id, { type: 'stream_closed', session_id: s.id, data: { reason: 'session_deleted' } })
    throw new BurrowError('SESSION_NOT_FOUND', `Session ${s.id} not found.`)
  }

  /**
   * Replaces a cached record with the stored one another replica wrote past it. The subscribers of
   * the session stay: each knows the last seq it delivered and reads what it misses from the log
   * (Subscription.fillGapsFrom); only the hub's replay buffer, which misses those events, starts afresh.
   */
  private reloaded(s: LiveSession, stored: SessionRecord): void {
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
        this.opts.logger.warn({ session_id: session.id }, 'lost the lease of a session to another replica: its events were refused')
      else if (e.code === 'STORE_UNAVAILABLE') this.opts.logger.warn({ err: e, session_id: session.id }, 'events could not be made durable')
      else this.opts.logger.error({ err: e.cause ?? err, session_id: session.id }, 'events could not be stored')
      throw e
    }
  }

  /**
   * Closes every turn a previous process left running: synthetic results for its open tool
   * calls, then `turn_failed` with `reason: process_restarted`. Run once, at start-up; returns how many.
   */
  async recover(): Promise<number> {
    if (this.keeper) return this.recoverLeased()
    let n = 0
    for (const id of await this.repo.sessions.runningTurns()) {
      const record = await this.repo.sessions.get(id)
      if (!record?.open_turn) continue
      const turn = record.open_turn.turn
      const s = this.adopt(record)
      await closeOpenTurn(s, 'INTERRUPTED', 'The process stopped while this turn was running.', 'process_restarted')
      await this.settle(s)
      this.opts.logger.warn({ session_id: id, turn }, 'closed a turn left running by a previous process')
      n++
    }
    return n
  }

  /**
   * With leases (at start-up, and then periodically on every replica): closes the turns whose
   * lease expired — their replica died — under the session's lease, so two replicas never close
   * the same turn and a live replica's turn is never closed. Paused turns are not running: they stay.
   */
  private async recoverLeased(): Promise<number> {
    let n = 0
    for (const id of await this.repo.sessions.runningTurns()) {
      const tenant = await this.repo.sessions.tenantOf(id)
      if (tenant === undefined) continue
      try {
        const s = await this.get(tenant, id)
        const turn = s.record.open_turn?.turn
        await this.exclusive(s, async () => undefined)
        if (turn !== undefined && s.record.open_turn?.turn !== turn) n++
      } catch (err) {
        // Taken by another replica meanwhile (it recovers it), deleted, or the store is away: the next sweep sees.
        const code = (err as BurrowError).code
        if (code !== 'SESSION_BUSY' && code !== 'SESSION_NOT_FOUND') throw err
      }
    }
    return n
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
    this.keeper?.forget(id)
  }

  /** Tells the listeners that a session was deleted (after the repository purged it). */
  async deleted(id: string): Promise<void> {
    this.keeper?.forget(id)
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
    if ((await this.repo.sessions.tenantOf(id)) !== tenant) return undefined
    return this.repo.sessions.get(id)
  }

  private evictIdle(): void {
    if (this.live.size <= this.opts.maxLive) return
    const idle = [...this.live.values()]
      .filter((s) => !s.running && !s.record.open_turn && this.hub.subscriberCount(s.id) === 0)
      .sort((a, b) => a.lastActive - b.lastActive)
    for (const s of idle) {
      if (this.live.size <= this.opts.maxLive) break
      this.opts.logger.debug({ session_id: s.id }, 'evicting idle session from memory')
      this.forget(s.id)
    }
  }

  /** The commit path with listeners: they are told once the repository made the events durable. */
  private readonly commitAndTell: CommitFn = (events, session, discarded, outcomes) => {
    const batch: CommittedBatch = { session, events, discarded }
    const done = this.repo.commit(events, session.record, this.fence(session.id), outcomes)
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
        this.opts.logger.error({ err, session_id: batch.session.id }, 'a commit listener failed')
      }
    }
  }
}
