import { BurrowError } from '../core/errors.js'
import type { SessionLease } from '../core/stores.js'
import { closeAbandonedTurn, closeOpenTurn } from '../session/close-turn.js'
import type { LiveSession } from '../session/live-session.js'
import type { SessionCache, SessionOwnership } from '../session/session-ownership.js'
import type { LeaseKeeper } from './lease-keeper.js'

/**
 * Replicas sharing a PostgreSQL store: a session is owned under its lease (lease-keeper.ts), whose
 * fencing token its commits carry. Taking the lease brings the cached session up to the store
 * and closes a turn its previous owner left running; a read of a cached session checks the stored
 * last seq first; start-up and a periodic sweep close the turns of replicas that died.
 */
export class LeasedOwner implements SessionOwnership {
  readonly shared = true

  constructor(
    private readonly cache: SessionCache,
    private readonly keeper: LeaseKeeper,
  ) {}

  hold<T>(s: LiveSession, work: () => Promise<T>): Promise<T> {
    return this.keeper.hold(s, (lease, heldBefore) => this.revalidate(s, lease, heldBefore), work)
  }

  fence(id: string): number {
    return this.keeper.tokenOf(id)
  }

  /** Another replica asks for the session's lease (lease-keeper.ts, giveUp). */
  giveUp(id: string): Promise<boolean | null> {
    return this.keeper.giveUp(id)
  }

  /**
   * Under the session's lease, before any work: reloaded if the stored log moved past the cached
   * record, and a turn the log says is running that nobody runs is closed — run here under the
   * previous lease, its events stopped reaching the store (closeAbandonedTurn); else its replica died.
   */
  private async revalidate(s: LiveSession, lease: SessionLease, heldBefore: boolean): Promise<void> {
    await s.settled().catch(() => undefined)
    if (lease.lastSeq !== s.record.last_seq) {
      const stored = await this.cache.repository.sessions.get(s.id)
      if (!stored) throw new BurrowError('SESSION_NOT_FOUND', `Session ${s.id} not found.`)
      this.cache.reloaded(s, stored)
    }
    if (s.running || s.record.open_turn?.state !== 'running') return
    if (heldBefore) await closeAbandonedTurn(s)
    else {
      await closeOpenTurn(s, 'INTERRUPTED', 'The replica running this turn stopped.', 'process_restarted')
      this.cache.logger.warn({ session_id: s.id, previous_owner: lease.previousOwner }, 'closed a turn whose replica stopped')
    }
    await this.cache.settle(s)
  }

  /**
   * One indexed query: a cached session is loaded again when another replica wrote past it, so a
   * read shows every turn acknowledged anywhere before it.
   */
  async current(s: LiveSession): Promise<LiveSession> {
    const repo = this.cache.repository
    const last = await repo.events.lastSeq(s.id)
    if (last === 0) return this.cache.deletedElsewhere(s)
    if (last > s.record.last_seq) {
      const stored = await repo.sessions.get(s.id)
      if (!stored) return this.cache.deletedElsewhere(s)
      // Work that began here meanwhile revalidates by itself, and a concurrent reload may have gone
      // further: the record only ever moves forward, and never under running work.
      if (!s.running && stored.last_seq > s.record.last_seq) this.cache.reloaded(s, stored)
    }
    s.lastActive = Date.now()
    return s
  }

  /**
   * With no work running here, the last seq stored (or published here, when that is behind), so
   * events other replicas commit after it reach the stream even when this replica's own next event
   * comes first (they are read from the log).
   */
  streamStart(s: LiveSession): number | undefined {
    if (s.running) return undefined
    return Math.min(s.record.last_seq, this.cache.hub.publishedSeq(s.id) ?? Infinity)
  }

  /**
   * Closes the turns whose lease expired — their replica died — under the session's lease, so two
   * replicas never close the same turn and a live replica's turn is never closed. Paused turns are
   * not running: they stay.
   */
  async recover(): Promise<number> {
    const repo = this.cache.repository
    let n = 0
    for (const id of await repo.sessions.runningTurns()) {
      const tenant = await repo.sessions.tenantOf(id)
      if (tenant === undefined) continue
      try {
        const s = await this.cache.get(tenant, id)
        const turn = s.record.open_turn?.turn
        await this.hold(s, async () => undefined)
        if (turn !== undefined && s.record.open_turn?.turn !== turn) n++
      } catch (err) {
        // Taken by another replica meanwhile (it recovers it), deleted, or the store is away: the next sweep sees.
        const code = (err as BurrowError).code
        if (code !== 'SESSION_BUSY' && code !== 'SESSION_NOT_FOUND') throw err
      }
    }
    return n
  }

  forget(id: string): void {
    this.keeper.forget(id)
  }

  close(): Promise<void> {
    return this.keeper.close()
  }
}
