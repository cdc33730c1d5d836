import type pg from 'pg'
import type { LeaseHeld, SessionLease, SessionLeases } from '../core/stores.js'
import type { PgAccess } from './pg-access.js'
import { StatementBatcher } from './pg-batcher.js'
import { retryingDeadlocks } from './pg-pool.js'

// One statement takes the leases of a batch of sessions: each lease row is inserted, or taken over
// where it has expired, with the next token; the session row's `fence` becomes that token. Updating
// the session row waits for a commit holding it and then reads the row as that commit left it, so
// the returned last seq is never older than a commit the previous holder made, and every commit
// after this one with an older token finds `fence` past its own and is refused (pg-commit-batch.ts).
// The previous owner comes from the statement's snapshot: for logs and for telling a turn this
// process abandoned from a dead replica's (LeaseKeeper), not for the exclusion. This owner's own
// lease is taken over too: the process keeps its leases in memory (LeaseKeeper) and asks only for
// one it does not hold — one whose release failed, one it kept after its work with too little of it
// left, or one whose acquisition answered nothing when the connection broke. A session not taken is leased elsewhere — answered
// with the session row's `running` flag, so the caller knows whether a turn runs there — or gone.
// Lease statements do not wait for their WAL flush (synchronous_commit off for their own
// transaction only): they are visible to every replica at once, and durable with the next commit
// of any session (the WAL is flushed in order). A database that crashes first forgets at most the
// last moments of them: a forgotten release only lets the lease run to its expiry, and commits
// under a forgotten lease's token are refused (pg-commit-batch.ts checks the lease row).
const NO_FLUSH_WAIT = `(SELECT set_config('synchronous_commit', 'off', true)) AS nowait`

const ACQUIRE = `WITH i AS (SELECT * FROM unnest($1::text[], $2::text[]) AS i(tenant, session_id)),
prev AS (SELECT l.tenant, l.session_id, l.owner FROM leases l JOIN i ON l.tenant = i.tenant AND l.session_id = i.session_id),
l AS (
  INSERT INTO leases AS l (tenant, session_id, owner, token, expires_at)
  SELECT s.tenant, s.session_id, $3, 1, now() + $4 * interval '1 millisecond'
  FROM i JOIN sessions s ON s.tenant = i.tenant AND s.session_id = i.session_id
  ON CONFLICT (tenant, session_id) DO UPDATE SET owner = excluded.owner, token = l.token + 1, expires_at = excluded.expires_at
  WHERE l.expires_at <= now() OR l.owner = $3
  RETURNING l.tenant, l.session_id, l.token),
f AS (UPDATE sessions SET fence = l.token FROM l WHERE sessions.tenant = l.tenant AND sessions.session_id = l.session_id
  RETURNING l.tenant, l.session_id, l.token, sessions.last_seq)
SELECT i.tenant, i.session_id, f.token, f.last_seq, prev.owner AS previous, s.running
  FROM i LEFT JOIN f ON f.tenant = i.tenant AND f.session_id = i.session_id
  LEFT JOIN prev ON prev.tenant = i.tenant AND prev.session_id = i.session_id
  LEFT JOIN sessions s ON s.tenant = i.tenant AND s.session_id = i.session_id CROSS JOIN ${NO_FLUSH_WAIT}`
const RENEW = `UPDATE leases SET expires_at = now() + $5 * interval '1 millisecond'
  WHERE tenant = $1 AND session_id = $2 AND owner = $3 AND token = $4`
// Ends a batch of this owner's leases (each as held under its token).
const RELEASE = `UPDATE leases AS l SET expires_at = now()
  FROM unnest($1::text[], $2::text[], $3::bigint[]) AS r(tenant, session_id, token), ${NO_FLUSH_WAIT}
  WHERE l.tenant = r.tenant AND l.session_id = r.session_id AND l.owner = $4 AND l.token = r.token AND l.expires_at > now()`

type Acquired =
  | { token: number; lastSeq: number; previous: string | null }
  /** Not taken: another replica's live lease (`running` as the session row says), or no such session. */
  | LeaseHeld
  | undefined
interface LeaseKey {
  tenant: string
  sessionId: string
}

/**
 * Session leases in PostgreSQL's `leases` table: owner (the replica id), a per-session token that
 * only grows (the row stays when a lease ends; it goes with the session), and an expiry on the
 * database's clock, so replicas' clocks never matter. A lease that expired is anyone's to take.
 * Owner names must be unique among running replicas (BURROW_REPLICA_ID).
 */
export class PgLeases implements SessionLeases {
  /** Leases asked for while a batch is in flight are taken together (pg-batcher.ts). */
  private readonly acquiring: StatementBatcher<LeaseKey, Acquired>
  private readonly releasing: StatementBatcher<LeaseKey & { token: number }, void>

  constructor(
    private readonly pool: pg.Pool,
    private readonly db: PgAccess,
    readonly owner: string,
    readonly durationMs: number,
  ) {
    this.acquiring = new StatementBatcher((keys) => this.acquireAll(keys), leaseKey)
    this.releasing = new StatementBatcher<LeaseKey & { token: number }, void>((keys) => this.releaseAll(keys), leaseKey)
  }

  async acquire(sessionId: string, tenant: string): Promise<SessionLease | LeaseHeld | undefined> {
    const got = await this.acquiring.submit({ tenant, sessionId })
    if (!got || 'held' in got) return got
    const token = got.token
    const key = [tenant, sessionId, this.owner, token]
    return {
      token,
      lastSeq: got.lastSeq,
      previousOwner: got.previous,
      renew: async () => {
        const u = await this.db.write(
          () => this.pool.query({ name: 'burrow_lease_renew', text: RENEW, values: [...key, this.durationMs] }),
          `the lease of session ${sessionId}`,
        )
        return u.rowCount === 1
      },
      release: () => this.releasing.submit({ tenant, sessionId, token }),
    }
  }

  private async acquireAll(keys: LeaseKey[]): Promise<Acquired[]> {
    const values = [keys.map((k) => k.tenant), keys.map((k) => k.sessionId), this.owner, this.durationMs]
    const r = await this.batch({ name: 'burrow_lease_acquire', text: ACQUIRE, values }, keys)
    const got = new Map<string, Acquired>()
    type Row = {
      tenant: string
      session_id: string
      token: string | null
      last_seq: string
      previous: string | null
      running: boolean | null
    }
    for (const row of r.rows as Row[])
      got.set(
        leaseKey({ tenant: row.tenant, sessionId: row.session_id }),
        row.token !== null
          ? { token: Number(row.token), lastSeq: Number(row.last_seq), previous: row.previous ?? null }
          : row.running !== null
            ? { held: true, running: row.running }
            : undefined,
      )
    return keys.map((k) => got.get(leaseKey(k)))
  }

  private async releaseAll(keys: Array<LeaseKey & { token: number }>): Promise<void[]> {
    const values = [keys.map((k) => k.tenant), keys.map((k) => k.sessionId), keys.map((k) => k.token), this.owner]
    await this.batch({ name: 'burrow_lease_release', text: RELEASE, values }, keys)
    return keys.map(() => undefined)
  }

  /** Runs a batch's statement as a write, again when PostgreSQL picked it as a deadlock's victim. */
  private batch(q: pg.QueryConfig, keys: readonly LeaseKey[]): Promise<pg.QueryResult> {
    const what = keys.length === 1 ? `the lease of session ${keys[0]!.sessionId}` : `the leases of ${keys.length} sessions`
    return this.db.write(() => retryingDeadlocks(() => this.pool.query(q)), what)
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

function leaseKey(k: LeaseKey): string {
  return `${k.tenant}\u0000${k.sessionId}`
}
