import { BurrowError, leaseLost } from '../core/errors.js'
import type { Logger } from '../core/logger.js'
import type { SessionLease, SessionLeases } from '../core/stores.js'
import type { LiveSession } from '../session/live-session.js'

type Taken = (lease: SessionLease, heldBefore: boolean) => Promise<void>

/** A lease this process holds, shared by the work of this process on the session while any runs. */
interface Held {
  session: LiveSession
  ready: Promise<SessionLease>
  users: number
  timer: NodeJS.Timeout | null
  /** Set while no work holds the lease and it is kept for the next (see {@link LeaseKeeper}); it releases the lease when it fires. */
  linger: NodeJS.Timeout | null
  /** Until when (performance.now()) the database surely keeps the lease: its duration from before the last acquisition or renewal was sent. */
  validUntil: number
}

/**
 * Asks the replica that holds a session's lease to give it up when no work holds it there: true
 * once it has been released, false when it is busy there or nobody answered.
 */
export type LetGo = (tenant: string, sessionId: string) => Promise<boolean>

/**
 * The session leases this process holds (stores shared by several processes): taken when work
 * that writes a session's log begins — or joined, when other work of this process on the session
 * holds it already — renewed every third of its duration while the work runs, and kept for
 * `lingerMs` once the work's events are durable: work that comes for the session meanwhile holds
 * it again without a statement (a client's next turn, on a replica the load balancer keeps
 * choosing), and another replica that wants it asks for it (`letGo`), so it is released at once
 * when no work holds it here. A lease is held again only while at least half of its duration
 * is surely left on the database's clock (renewals every third of it keep two thirds or more left
 * while they succeed); else it is taken anew. A renewal that finds
 * the lease lost cancels the session's running work: its commits would be refused anyway (their
 * token is no longer the session's newest).
 */
export class LeaseKeeper {
  private readonly held = new Map<string, Held>()
  /** The token of the lease this process holds or last held per session: what its commits carry. */
  private readonly tokens = new Map<string, number>()
  private closed = false

  constructor(
    private readonly leases: SessionLeases,
    private readonly logger: Logger,
    /** How long a lease is kept after its work (0: released at once). */
    private readonly lingerMs = 0,
    /** Asks the replica holding a lease to give it up (the change feed); without it, a held lease is waited out. */
    private readonly letGo: LetGo | null = null,
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
    if (h?.linger) {
      clearTimeout(h.linger)
      h.linger = null
      // A session loaded again (after a failed write) is revalidated, and a lease near its end renewed: taken anew
      // (this owner's own lease is taken over, with the next token, without releasing it first).
      if (h.session !== session || performance.now() > h.validUntil - this.leases.durationMs / 2) {
        this.stop(h)
        h = undefined
      }
    }
    if (!h) {
      const fresh: Held = { session, ready: Promise.resolve(null as never), users: 0, timer: null, linger: null, validUntil: 0 }
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

  /** Forgets a deleted session's token and lease (the lease row went with the session). */
  forget(sessionId: string): void {
    this.tokens.delete(sessionId)
    const h = this.held.get(sessionId)
    if (h && h.users === 0) this.stop(h)
  }

  /**
   * Another replica asks for the session's lease: released now if it is kept here with no work
   * under it (true), refused while work holds it (false); null when this process does not hold it.
   */
  async giveUp(sessionId: string): Promise<boolean | null> {
    const h = this.held.get(sessionId)
    if (!h) return null
    if (!h.linger) return false
    this.stop(h)
    return this.release(h)
  }

  /** Releases the leases kept with no work under them (shutdown); later work releases its lease at once. */
  async close(): Promise<void> {
    this.closed = true
    const kept = [...this.held.values()].filter((h) => h.linger)
    for (const h of kept) this.stop(h)
    await Promise.all(kept.map((h) => this.release(h)))
  }

  private async take(h: Held, taken: Taken): Promise<SessionLease> {
    const id = h.session.id
    const tenant = h.session.tenant
    let sent = performance.now()
    let got = await this.leases.acquire(id, tenant)
    // Kept by another replica after its work (no turn running, as the store says): it gives it up when asked, unless work holds it there.
    if (got && 'held' in got && !got.running && this.letGo && (await this.letGo(tenant, id))) {
      sent = performance.now()
      got = await this.leases.acquire(id, tenant)
    }
    if (!got || 'held' in got)
      throw new BurrowError('SESSION_BUSY', `A turn is running on session ${id} on another replica.`, { reason: 'leased_elsewhere' })
    const lease = got
    h.validUntil = sent + this.leases.durationMs
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
    const sent = performance.now()
    lease.renew().then(
      (kept) => {
        if (kept) h.validUntil = sent + this.leases.durationMs
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

  /** The last work under the lease ended: once nothing written under it is in flight, kept for the next, or released. */
  private async end(h: Held): Promise<void> {
    const lease = await h.ready.catch(() => null)
    if (lease) await h.session.settled().catch(() => undefined)
    if (h.users > 0 || this.held.get(h.session.id) !== h) return // joined meanwhile, or lost
    if (lease && this.lingerMs > 0 && !this.closed && this.tokens.has(h.session.id)) {
      h.linger = setTimeout(() => {
        if (h.linger === null) return
        this.stop(h)
        void this.release(h)
      }, this.lingerMs)
      h.linger.unref()
      return
    }
    this.stop(h)
    if (lease) await this.release(h)
  }

  /** Releases the lease (no longer in `held`); false when that failed (it then runs to its expiry). */
  private async release(h: Held): Promise<boolean> {
    const lease = await h.ready.catch(() => null)
    if (!lease) return false
    try {
      await lease.release()
      return true
    } catch (err) {
      this.logger.warn({ err, session_id: h.session.id }, 'a session lease could not be released')
      return false
    }
  }

  private stop(h: Held): void {
    if (h.timer) clearInterval(h.timer)
    if (h.linger) clearTimeout(h.linger)
    h.linger = null
    if (this.held.get(h.session.id) === h) this.held.delete(h.session.id)
  }
}
