import type pg from 'pg'
import type { SessionLease, SessionLeases } from '../core/stores.js'
import type { PgAccess } from './pg-access.js'

// One statement takes a lease: the lease row is inserted, or taken over where it has expired, with
// the next token; the session row's `fence` becomes that token. Updating the session row waits for
// a commit holding it and then reads the row as that commit left it, so the returned last seq is
// never older than a commit the previous holder made, and every commit after this one with an older
// token finds `fence` past its own and is refused (pg-commit-writer.ts). The previous owner comes
// from the statement's snapshot: for logs and for telling a turn this process abandoned from a dead
// replica's (LeaseKeeper), not for the exclusion. This owner's own lease is taken over
// too: the process keeps its leases in memory (LeaseKeeper) and asks only for one it does not hold —
// one whose release failed, or whose acquisition answered nothing when the connection broke.
const ACQUIRE = `WITH prev AS (SELECT owner FROM leases WHERE tenant = $1 AND session_id = $2),
l AS (
  INSERT INTO leases AS l (tenant, session_id, owner, token, expires_at)
  SELECT tenant, session_id, $3, 1, now() + $4 * interval '1 millisecond' FROM sessions WHERE tenant = $1 AND session_id = $2
  ON CONFLICT (tenant, session_id) DO UPDATE SET owner = excluded.owner, token = l.token + 1, expires_at = excluded.expires_at
  WHERE l.expires_at <= now() OR l.owner = $3
  RETURNING token),
f AS (UPDATE sessions SET fence = l.token FROM l WHERE sessions.tenant = $1 AND sessions.session_id = $2 RETURNING l.token, sessions.last_seq)
SELECT f.token, f.last_seq, (SELECT owner FROM prev) AS previous FROM f`
const RENEW = `UPDATE leases SET expires_at = now() + $5 * interval '1 millisecond'
  WHERE tenant = $1 AND session_id = $2 AND owner = $3 AND token = $4`
const RELEASE = `UPDATE leases SET expires_at = now() WHERE tenant = $1 AND session_id = $2 AND owner = $3 AND token = $4 AND expires_at > now()`

/**
 * Session leases in PostgreSQL's `leases` table: owner (the replica id), a per-session token that
 * only grows (the row stays when a lease ends; it goes with the session), and an expiry on the
 * database's clock, so replicas' clocks never matter. A lease that expired is anyone's to take.
 * Owner names must be unique among running replicas (BURROW_REPLICA_ID).
 */
export class PgLeases implements SessionLeases {
  constructor(
    private readonly pool: pg.Pool,
    private readonly db: PgAccess,
    readonly owner: string,
    readonly durationMs: number,
  ) {}

  async acquire(sessionId: string, tenant: string): Promise<SessionLease | undefined> {
    const r = await this.db.write(
      () => this.pool.query({ name: 'burrow_lease_acquire', text: ACQUIRE, values: [tenant, sessionId, this.owner, this.durationMs] }),
      `the lease of session ${sessionId}`,
    )
    const row = r.rows[0]
    if (!row) return undefined
    const token = Number(row.token)
    const key = [tenant, sessionId, this.owner, token]
    return {
      token,
      lastSeq: Number(row.last_seq),
      previousOwner: (row.previous as string | null) ?? null,
      renew: async () => {
        const u = await this.db.write(
          () => this.pool.query({ name: 'burrow_lease_renew', text: RENEW, values: [...key, this.durationMs] }),
          `the lease of session ${sessionId}`,
        )
        return u.rowCount === 1
      },
      release: async () => {
        await this.db.write(
          () => this.pool.query({ name: 'burrow_lease_release', text: RELEASE, values: key }),
          `the lease of session ${sessionId}`,
        )
      },
    }
  }

  /**
   * Ends the leases this owner name still holds: those of an earlier process with the same replica
   * id, which died (this one holds none yet), so their turns are recovered now, not a lease later.
   */
  async releaseOwned(): Promise<number> {
    const r = await this.db.write(
      () => this.pool.query('UPDATE leases SET expires_at = now() WHERE owner = $1 AND expires_at > now()', [this.owner]),
      'the leases of an earlier process',
    )
    return r.rowCount ?? 0
  }
}
