import type pg from 'pg'
import type { ProjectionWriterLease } from '../core/stores.js'
import type { PgAccess } from './pg-access.js'

/**
 * The writer's lease is a row of the `leases` table under a key no session can have: tenant names
 * are 1–128 letters, digits, '_', '.' or '-' (an empty tenant is never one), and session ids are
 * UUIDv7. So no migration, and the session queries on `leases` (the turn recovery sweep's join on
 * `sessions`, a deletion's purge by tenant and id) never see it; `releaseOwned` at start-up ends a
 * dead predecessor's (same replica id) writer lease with its session leases, as it should.
 */
const TENANT = ''
const KEY = 'projection-writer'

// Taken where it has expired (or was never taken), renewed where this owner holds it. The token
// grows at each change of hands: for the logs, since the files need no fencing (each replica
// writes its own directory, and a checkpoint only grows).
const HOLD = `INSERT INTO leases AS l (tenant, session_id, owner, token, expires_at)
  VALUES ($1, $2, $3, 1, now() + $4 * interval '1 millisecond')
  ON CONFLICT (tenant, session_id) DO UPDATE SET owner = excluded.owner,
    token = CASE WHEN l.owner = excluded.owner AND l.expires_at > now() THEN l.token ELSE l.token + 1 END,
    expires_at = excluded.expires_at
  WHERE l.expires_at <= now() OR l.owner = excluded.owner
  RETURNING token`
const RELEASE = `UPDATE leases SET expires_at = now() WHERE tenant = $1 AND session_id = $2 AND owner = $3 AND expires_at > now()`

/** The projection writer's lease in PostgreSQL (docs/scaling.md, The projection), on the database's clock. */
export class PgProjectionLease implements ProjectionWriterLease {
  constructor(
    private readonly pool: pg.Pool,
    private readonly db: PgAccess,
    readonly owner: string,
    readonly durationMs: number,
  ) {}

  async hold(): Promise<boolean> {
    const r = await this.db.write(
      () => this.pool.query({ name: 'burrow_projection_hold', text: HOLD, values: [TENANT, KEY, this.owner, this.durationMs] }),
      'the projection writer lease',
    )
    return r.rowCount === 1
  }

  async release(): Promise<void> {
    await this.db.write(() => this.pool.query(RELEASE, [TENANT, KEY, this.owner]), 'the projection writer lease')
  }
}
