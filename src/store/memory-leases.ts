import { leaseLost } from '../core/errors.js'
import type { EventEnvelope } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { IdempotencyWrite, LeaseHeld, SessionLease, SessionLeases, SessionRepository } from '../core/stores.js'
import type { MemorySessionRepository } from './memory-session-repository.js'

interface Row {
  owner: string
  token: number
  expiresAt: number
}

/**
 * The reference of session leases, in process memory: one table that several owners share, as
 * replicas share PostgreSQL's `leases` table (pg-leases.ts), with the same rules — a lease is
 * taken when none is held or the holder's expired, each taking gets the next token of the session,
 * a renewal succeeds only while the lease is still the holder's, and a commit made under an older
 * token than the session's newest is refused (lease_lost). Lets the replicas' logic run in one
 * process, several "replicas" over one in-memory store (`replica`).
 */
export class MemoryLeaseTable {
  private readonly rows = new Map<string, Row>()
  /** The newest token per session (tokens only grow, as PostgreSQL's `sessions.fence`). */
  private readonly fences = new Map<string, number>()

  constructor(
    private readonly store: MemorySessionRepository,
    readonly durationMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** A view of the shared store as the replica named `owner` sees it: its leases, and commits fenced. */
  replica(owner: string): SessionRepository & { leases: SessionLeases } {
    const store = this.store
    const leases: SessionLeases = { owner, durationMs: this.durationMs, acquire: (id, tenant) => this.acquire(owner, id, tenant) }
    return {
      events: store.events,
      sessions: store.sessions,
      idempotency: store.idempotency,
      projection: store.projection,
      leases,
      commit: (events: readonly EventEnvelope[], snapshot: SessionRecord, fence = 0, outcomes?: readonly IdempotencyWrite[]) =>
        this.commit(owner, events, snapshot, fence, outcomes),
      deleteSession: (id: string, tenant: string) => {
        this.rows.delete(id)
        return store.deleteSession(id, tenant)
      },
      writable: () => store.writable(),
      requirePersistence: () => store.requirePersistence(),
      close: async () => undefined,
    }
  }

  /** Ends every lease `owner` holds now, as if it had stopped renewing them long enough ago. */
  expire(owner: string): void {
    for (const row of this.rows.values()) if (row.owner === owner) row.expiresAt = this.now()
  }

  /** Who holds the session's lease now, if anyone. */
  holder(sessionId: string): string | null {
    const row = this.rows.get(sessionId)
    return row && row.expiresAt > this.now() ? row.owner : null
  }

  private async acquire(owner: string, sessionId: string, tenant: string): Promise<SessionLease | LeaseHeld | undefined> {
    const record = await this.store.sessions.get(sessionId)
    if (!record || record.config.tenant !== tenant) return undefined
    const row = this.rows.get(sessionId)
    if (row && row.expiresAt > this.now() && row.owner !== owner) return { held: true, running: record.open_turn?.state === 'running' }
    const token = (this.fences.get(sessionId) ?? 0) + 1
    this.fences.set(sessionId, token)
    const mine: Row = { owner, token, expiresAt: this.now() + this.durationMs }
    this.rows.set(sessionId, mine)
    return {
      token,
      lastSeq: record.last_seq,
      previousOwner: row?.owner ?? null,
      renew: async () => {
        if (this.rows.get(sessionId) !== mine || mine.expiresAt <= this.now()) return false
        mine.expiresAt = this.now() + this.durationMs
        return true
      },
      release: async () => {
        if (this.rows.get(sessionId) === mine) mine.expiresAt = this.now()
      },
    }
  }

  private async commit(
    owner: string,
    events: readonly EventEnvelope[],
    snapshot: SessionRecord,
    fence: number,
    outcomes?: readonly IdempotencyWrite[],
  ): Promise<void> {
    const sid = snapshot.session_id
    const newest = this.fences.get(sid) ?? 0
    const row = this.rows.get(sid)
    // A new session has no lease yet; an existing one's commits carry the token of a lease this owner still holds.
    const fenced = fence > 0 ? fence < newest || row?.owner !== owner || row.token !== fence : newest > 0 && events[0]?.seq !== 1
    if (fenced) throw leaseLost(sid)
    await this.store.commit(events, snapshot, fence, outcomes)
  }
}
