import { BurrowError, leaseLost } from '../core/errors.js'
import type { Logger } from '../core/logger.js'
import type { SessionLease, SessionLeases } from '../core/stores.js'
import type { LiveSession } from './live-session.js'

type Taken = (lease: SessionLease, heldBefore: boolean) => Promise<void>

/** A lease this process holds, shared by the work of this process on the session while any runs. */
interface Held {
  session: LiveSession
  ready: Promise<SessionLease>
  users: number
  timer: NodeJS.Timeout | null
}

/**
 * The session leases this process holds (stores shared by several processes): taken when work
 * that writes a session's log begins — or joined, when other work of this process on the session
 * holds it already — renewed every third of its duration while the work runs, released once the
 * work's events are durable. A renewal that finds the lease lost cancels the session's running
 * work: its commits would be refused anyway (their token is no longer the session's newest).
 */
export class LeaseKeeper {
  private readonly held = new Map<string, Held>()
  /** The token of the lease this process holds or last held per session: what its commits carry. */
  private readonly tokens = new Map<string, number>()

  constructor(
    private readonly leases: SessionLeases,
    private readonly logger: Logger,
  ) {}

  tokenOf(sessionId: string): number {
    return this.tokens.get(sessionId) ?? 0
  }

  /**
   * Runs `work` holding the session's lease; SESSION_BUSY when another process holds it.
   * `taken` runs once, when this process takes the lease (before any work under it), told whether
   * this process held the session's previous lease.
   */
  async hold<T>(session: LiveSession, taken: Taken, work: () => Promise<T>): Promise<T> {
    let h = this.held.get(session.id)
    if (!h) {
      const fresh: Held = { session, ready: Promise.resolve(null as never), users: 0, timer: null }
      fresh.ready = this.take(fresh, taken)
      this.held.set(session.id, (h = fresh))
    }
    h.users++
    try {
      await h.ready
      return await work()
    } finally {
      h.users--
      if (h.users === 0) await this.end(h)
    }
  }

  /** Forgets a deleted session's token. */
  forget(sessionId: string): void {
    this.tokens.delete(sessionId)
  }

  private async take(h: Held, taken: Taken): Promise<SessionLease> {
    const id = h.session.id
    const lease = await this.leases.acquire(id, h.session.tenant)
    if (!lease)
      throw new BurrowError('SESSION_BUSY', `A turn is running on session ${id} on another replica.`, { reason: 'leased_elsewhere' })
    // Held before by this process, and no other replica held it since: a turn the log says is running
    // is then this process's own, abandoned by a failed write. A lease of this process's that another
    // replica's came after says nothing about that turn: the other replica ran it, and died.
    const before = this.tokens.has(id) && lease.previousOwner === this.leases.owner
    this.tokens.set(id, lease.token)
    h.timer = setInterval(() => this.renew(h, lease), Math.max(100, Math.floor(this.leases.durationMs / 3)))
    h.timer.unref()
    try {
      await taken(lease, before)
    } catch (err) {
      clearInterval(h.timer)
      await lease.release().catch(() => undefined) // the lease expires by itself if this fails too
      throw err
    }
    return lease
  }

  private renew(h: Held, lease: SessionLease): void {
    lease.renew().then(
      (kept) => {
        if (kept || this.held.get(h.session.id) !== h) return
        this.stop(h)
        this.logger.error({ session_id: h.session.id, token: lease.token }, 'lost the lease of a session to another replica')
        // The answer a refused commit gives too (pg-commit-writer.ts), whichever of the two comes first.
        h.session.running?.signal.abort(leaseLost(h.session.id))
      },
      // The database may be back before the lease expires; while it is not, commits fail by themselves.
      (err: unknown) => this.logger.warn({ err, session_id: h.session.id }, 'a session lease could not be renewed'),
    )
  }

  private async end(h: Held): Promise<void> {
    const lease = await h.ready.catch(() => null)
    if (lease) await h.session.settled().catch(() => undefined) // released once nothing written under it is in flight
    if (h.users > 0 || this.held.get(h.session.id) !== h) return // joined meanwhile, or lost
    this.stop(h)
    if (lease)
      await lease
        .release()
        .catch((err: unknown) => this.logger.warn({ err, session_id: h.session.id }, 'a session lease could not be released'))
  }

  private stop(h: Held): void {
    if (h.timer) clearInterval(h.timer)
    if (this.held.get(h.session.id) === h) this.held.delete(h.session.id)
  }
}
