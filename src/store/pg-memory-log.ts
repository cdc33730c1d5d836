import type pg from 'pg'
import type { LogBatch, LoggedEntry, MemoryLog, TenantChanges, TenantHead } from '../core/memory-log.js'
import type { MemoryEntry } from '../core/memory-store.js'
import { claimLost } from '../core/errors.js'
import type { IdempotencyWrite } from '../core/stores.js'
import { splitIdempotencyKey } from './idempotency-key.js'
import { PgAccess } from './pg-access.js'
import { PgIdempotencyStore } from './pg-idempotency-store.js'
import { migrate, type Migrated } from './pg-migrate.js'
import { openPool } from './pg-pool.js'

export interface PgMemoryLogOptions {
  url: string
  poolSize: number
  replicaId: string
  /** The posting block without the given labels' documents, or null when none is left (posting-blocks.ts `withoutLabels`). */
  withoutLabels(first: number, block: Uint8Array, drop: ReadonlySet<number>): Uint8Array | null
  onHealth?: (writable: boolean, err?: unknown) => void
  /** How long idempotent adds' outcomes are kept (default 24 hours). */
  idempotencyTtlMs?: number
  /** How long a claim of an idempotency key holds unless renewed (the lease duration; default 10 s). */
  claimMs?: number
}

const WHAT = 'memory entries'
/**
 * How long a deletion stays recorded for replicas to replay. A local copy that has not caught up
 * for longer (a replica stopped for a week, its data directory kept) is compared with the
 * database's labels instead (`changes`, `forgotten`): one read of the tenant's labels, no entry
 * embedded again.
 */
export const DELETION_RETENTION_MS = 7 * 24 * 3_600_000
/** Deletions forgotten per transaction: each holds its tenants' rows for a moment only. */
const PRUNE_BATCH = 5_000

/** The entry as stored in `record` (json): what MemoryEntry has beyond tenant, id and session. */
interface Record_ {
  content: string
  turn: number | null
  seq: number | null
  created_at: string
  metadata?: Record<string, string>
}

/**
 * Memory entries in PostgreSQL (the tables of pg-memory-schema.ts), on a pool of its own. A
 * tenant's row in `memory_tenants` is its write lock: an add or a deletion takes it first
 * (tenants in sorted order, so two adds never deadlock), so labels commit in order and a
 * deletion of a session cannot interleave with an add of its entries.
 */
export class PgMemoryLog implements MemoryLog {
  /**
   * The outcomes of idempotent adds, in the `idempotency` table (the schema is the session store's,
   * the same table when both stores share the database), with claims across replicas; `append`
   * writes an add's outcome in the transaction of its entries.
   */
  readonly idempotency: PgIdempotencyStore

  private constructor(
    private readonly pool: pg.Pool,
    private readonly access: PgAccess,
    private readonly opts: PgMemoryLogOptions,
    readonly migrated: Migrated,
  ) {
    this.idempotency = new PgIdempotencyStore(pool, access, opts.idempotencyTtlMs ?? 24 * 3_600_000, opts.replicaId, opts.claimMs ?? 10_000)
  }

  static async open(opts: PgMemoryLogOptions): Promise<PgMemoryLog> {
    let access: PgAccess | undefined
    const pool = openPool({
      url: opts.url,
      size: opts.poolSize,
      applicationName: `burrow-memory ${opts.replicaId}`,
      onIdleError: () => access?.connectionLost(),
    })
    try {
      const migrated = await migrate(pool)
      access = new PgAccess(pool, opts.onHealth)
      const log = new PgMemoryLog(pool, access, opts, migrated)
      await log.idempotency.releaseOwned()
      return log
    } catch (err) {
      await pool.end().catch(() => undefined)
      throw err
    }
  }

  append(
    batches: readonly LogBatch[],
    outcome?: () => IdempotencyWrite | undefined,
  ): Promise<{ first: number[] } | { deletedSession: string }> {
    const order = batches.map((_, i) => i).sort((a, b) => (batches[a]!.tenant < batches[b]!.tenant ? -1 : 1))
    return this.access.write(
      () =>
        this.tx(async (c) => {
          const first: number[] = new Array(batches.length)
          for (const i of order) {
            const b = batches[i]!
            const n = b.entries.length
            const head = await c.query(
              `INSERT INTO memory_tenants AS t (tenant, next, docs) VALUES ($1, $2, $2)
               ON CONFLICT (tenant) DO UPDATE SET next = t.next + $2, docs = t.docs + $2 RETURNING t.next - $2 AS first`,
              [b.tenant, n],
            )
            const sessions = [...new Set(b.entries.flatMap((e) => (e.entry.session_id ? [e.entry.session_id] : [])))]
            if (sessions.length > 0) {
              const gone = await c.query(
                'SELECT session_id FROM memory_deleted_sessions WHERE tenant = $1 AND session_id = ANY($2) LIMIT 1',
                [b.tenant, sessions],
              )
              if (gone.rows.length > 0) return { deletedSession: String(gone.rows[0].session_id) }
            }
            const from = Number(head.rows[0].first)
            first[i] = from
            await c.query(
              `INSERT INTO memory_entries (tenant, label, id, session_id, len, record)
               SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::integer[], $6::json[])`,
              [
                b.tenant,
                b.entries.map((_, j) => from + j),
                b.entries.map((e) => e.entry.id),
                b.entries.map((e) => e.entry.session_id),
                b.entries.map((e) => e.len),
                b.entries.map((e) => JSON.stringify(recordOf(e.entry))),
              ],
            )
            await c.query('INSERT INTO memory_postings (tenant, first, postings) VALUES ($1, $2, $3)', [
              b.tenant,
              from,
              Buffer.from(b.postings),
            ])
          }
          // Sealed here, once nothing refused the batches: an outcome exists only where its entries do.
          const o = outcome?.()
          if (o) {
            const [tenant, scope, key] = splitIdempotencyKey(o.key)
            // Under this replica's claim, still held (the row locked till the commit): else another replica took the add over.
            if (o.claim !== undefined) {
              const held = await c.query(
                `SELECT 1 FROM idempotency WHERE tenant = $1 AND session_id = $2 AND key = $3 AND owner = $4 AND created_at = $5
                   AND pending_until IS NOT NULL FOR UPDATE`,
                [tenant, scope, key, this.opts.replicaId, o.claim],
              )
              if (held.rows.length === 0) throw claimLost()
            }
            await c.query(
              `INSERT INTO idempotency (tenant, session_id, key, created_at, record) VALUES ($1, $2, $3, $4, $5::json)
               ON CONFLICT (tenant, session_id, key) DO UPDATE SET created_at = excluded.created_at, record = excluded.record,
                 pending_until = NULL`,
              [tenant, scope, key, o.record.created_at, JSON.stringify(o.record)],
            )
          }
          return { first }
        }),
      WHAT,
    )
  }

  remove(tenant: string, what: { id: string } | { sessionId: string }): Promise<number[]> {
    return this.access.write(
      () =>
        this.tx(async (c) => {
          const head = await c.query(
            `INSERT INTO memory_tenants AS t (tenant) VALUES ($1) ON CONFLICT (tenant) DO UPDATE SET tenant = t.tenant RETURNING deletions`,
            [tenant],
          )
          const removed =
            'id' in what
              ? await c.query('DELETE FROM memory_entries WHERE tenant = $1 AND id = $2 RETURNING label', [tenant, what.id])
              : await c.query('DELETE FROM memory_entries WHERE tenant = $1 AND session_id = $2 RETURNING label', [tenant, what.sessionId])
          if ('sessionId' in what)
            await c.query('INSERT INTO memory_deleted_sessions (tenant, session_id) VALUES ($1, $2) ON CONFLICT DO NOTHING', [
              tenant,
              what.sessionId,
            ])
          const labels = removed.rows.map((r) => Number(r.label)).sort((a, b) => a - b)
          if (labels.length === 0) return labels
          const from = Number(head.rows[0].deletions)
          await c.query(
            `INSERT INTO memory_deletions (tenant, seq, label) SELECT $1, $2 + ord, l FROM unnest($3::bigint[]) WITH ORDINALITY AS u(l, ord)`,
            [tenant, from, labels],
          )
          await c.query('UPDATE memory_tenants SET deletions = deletions + $2, docs = docs - $2 WHERE tenant = $1', [tenant, labels.length])
          await this.dropPostings(c, tenant, labels)
          return labels
        }),
      WHAT,
    )
  }

  /** Rewrites the posting blocks holding these labels without them, so a deleted entry's words leave the database with it. */
  private async dropPostings(c: pg.PoolClient, tenant: string, labels: readonly number[]): Promise<void> {
    const blocks = await c.query(
      `SELECT DISTINCT b.first, b.postings FROM unnest($2::bigint[]) AS l(label) CROSS JOIN LATERAL
         (SELECT first, postings FROM memory_postings WHERE tenant = $1 AND first <= l.label ORDER BY first DESC LIMIT 1) b`,
      [tenant, labels],
    )
    const drop = new Set(labels)
    for (const row of blocks.rows) {
      const first = Number(row.first)
      const rest = this.opts.withoutLabels(first, row.postings as Buffer, drop)
      if (rest)
        await c.query('UPDATE memory_postings SET postings = $3 WHERE tenant = $1 AND first = $2', [tenant, first, Buffer.from(rest)])
      else await c.query('DELETE FROM memory_postings WHERE tenant = $1 AND first = $2', [tenant, first])
    }
  }

  heads(tenants: readonly string[]): Promise<Map<string, TenantHead>> {
    return this.access.read(async () => {
      const r = await this.pool.query('SELECT tenant, incarnation, next, deletions FROM memory_tenants WHERE tenant = ANY($1)', [tenants])
      return new Map(r.rows.map((row) => [String(row.tenant), headOf(row)]))
    }, WHAT)
  }

  changes(tenant: string, since: { next: number; deletions: number }): Promise<TenantChanges> {
    return this.access.read(
      () =>
        this.tx(async (c) => {
          const head = await c.query('SELECT incarnation, next, deletions, pruned FROM memory_tenants WHERE tenant = $1', [tenant])
          if (head.rows.length === 0)
            return { incarnation: '', next: 0, deletions: 0, removed: [], forgotten: false, added: [], blocks: [] }
          const h = headOf(head.rows[0])
          // Deletions the caller has not seen were forgotten: the labels it may hold are checked against the live ones.
          const forgotten = since.next > 0 && since.deletions < Number(head.rows[0].pruned)
          const removed = forgotten
            ? (
                await c.query(
                  `SELECT g AS label FROM generate_series(0::bigint, $2::bigint - 1) AS g
                   WHERE NOT EXISTS (SELECT 1 FROM memory_entries e WHERE e.tenant = $1 AND e.label = g) ORDER BY g`,
                  [tenant, since.next],
                )
              ).rows.map((r) => Number(r.label))
            : h.deletions > since.deletions
              ? (
                  await c.query('SELECT label FROM memory_deletions WHERE tenant = $1 AND seq > $2 ORDER BY seq', [tenant, since.deletions])
                ).rows.map((r) => Number(r.label))
              : []
          if (h.next <= since.next) return { ...h, removed, forgotten, added: [], blocks: [] }
          const added = await c.query(
            'SELECT label, id, session_id, len, record FROM memory_entries WHERE tenant = $1 AND label >= $2 ORDER BY label',
            [tenant, since.next],
          )
          const blocks = await c.query('SELECT first, postings FROM memory_postings WHERE tenant = $1 AND first >= $2 ORDER BY first', [
            tenant,
            since.next,
          ])
          return {
            ...h,
            removed,
            forgotten,
            added: added.rows.map((row) => loggedOf(tenant, row)),
            blocks: blocks.rows.map((row) => ({ first: Number(row.first), postings: row.postings as Buffer })),
          }
        }, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY'),
      WHAT,
    )
  }

  /**
   * Deletions recorded before `retentionMs` ago go, `batch` at a time (the oldest first, by the
   * index on `at`); each tenant's `pruned` rises to the highest seq forgotten, and every deletion of
   * the tenant up to it goes with them, so the recorded ones are exactly those after `pruned`.
   * Replicas may run it at once: a row gone under one is skipped by the other, and `pruned` only rises.
   */
  async pruneDeletions(retentionMs = DELETION_RETENTION_MS, batch = PRUNE_BATCH): Promise<number> {
    let total = 0
    for (;;) {
      const { found, gone } = await this.access.write(
        () =>
          this.tx(async (c) => {
            const old = await c.query(
              `SELECT tenant, max(seq) AS seq, count(*)::int AS n FROM
                 (SELECT tenant, seq FROM memory_deletions WHERE at < now() - make_interval(secs => $1) ORDER BY at LIMIT $2) o
               GROUP BY tenant ORDER BY tenant`,
              [retentionMs / 1000, batch],
            )
            const found = old.rows.reduce((n, r) => n + Number(r.n), 0)
            if (found === 0) return { found, gone: 0 }
            const tenants = old.rows.map((r) => String(r.tenant))
            const seqs = old.rows.map((r) => Number(r.seq))
            // The tenants' rows in order, as adds and deletions take them, so a commit over several cannot deadlock with this.
            await c.query('SELECT 1 FROM memory_tenants WHERE tenant = ANY($1) ORDER BY tenant FOR UPDATE', [tenants])
            await c.query(
              `UPDATE memory_tenants t SET pruned = GREATEST(t.pruned, u.seq)
               FROM unnest($1::text[], $2::bigint[]) AS u(tenant, seq) WHERE t.tenant = u.tenant`,
              [tenants, seqs],
            )
            const gone = await c.query(
              `DELETE FROM memory_deletions d USING unnest($1::text[], $2::bigint[]) AS u(tenant, seq)
               WHERE d.tenant = u.tenant AND d.seq <= u.seq`,
              [tenants, seqs],
            )
            return { found, gone: gone.rowCount ?? 0 }
          }),
        'the memory deletions prune',
      )
      total += gone
      if (found < batch) return total
    }
  }

  entries(tenant: string, q: { after: number; limit: number; sessionId?: string | undefined }): Promise<LoggedEntry[]> {
    return this.access.read(async () => {
      const r = q.sessionId
        ? await this.pool.query(
            'SELECT label, id, session_id, len, record FROM memory_entries WHERE tenant = $1 AND session_id = $2 AND label > $3 ORDER BY label LIMIT $4',
            [tenant, q.sessionId, q.after, q.limit],
          )
        : await this.pool.query(
            'SELECT label, id, session_id, len, record FROM memory_entries WHERE tenant = $1 AND label > $2 ORDER BY label LIMIT $3',
            [tenant, q.after, q.limit],
          )
      return r.rows.map((row) => loggedOf(tenant, row))
    }, WHAT)
  }

  entry(tenant: string, id: string): Promise<LoggedEntry | null> {
    return this.access.read(async () => {
      const r = await this.pool.query('SELECT label, id, session_id, len, record FROM memory_entries WHERE tenant = $1 AND id = $2', [
        tenant,
        id,
      ])
      return r.rows.length === 0 ? null : loggedOf(tenant, r.rows[0])
    }, WHAT)
  }

  count(tenant: string): Promise<number> {
    return this.access.read(async () => {
      const r = await this.pool.query('SELECT docs FROM memory_tenants WHERE tenant = $1', [tenant])
      return r.rows.length === 0 ? 0 : Number(r.rows[0].docs)
    }, WHAT)
  }

  healthy(): boolean {
    return this.access.writable()
  }

  async close(): Promise<void> {
    this.idempotency.close()
    this.access.close()
    await this.pool.end()
  }

  /** Runs `work` in a transaction on one connection (rolled back when it throws or returns a refusal). */
  private async tx<T>(work: (c: pg.PoolClient) => Promise<T>, begin = 'BEGIN'): Promise<T> {
    const c = await this.pool.connect()
    // A checked-out client has no error listener of the pool's: a connection lost meanwhile must not crash the process.
    const onError = () => undefined
    c.on('error', onError)
    let broken: Error | undefined
    try {
      await c.query(begin)
      const result = await work(c)
      await c.query(result && typeof result === 'object' && 'deletedSession' in result ? 'ROLLBACK' : 'COMMIT')
      return result
    } catch (err) {
      broken = err as Error
      await c.query('ROLLBACK').catch(() => undefined)
      throw err
    } finally {
      c.removeListener('error', onError)
      c.release(broken)
    }
  }
}

function recordOf(e: MemoryEntry): Record_ {
  return { content: e.content, turn: e.turn, seq: e.seq, created_at: e.created_at, ...(e.metadata ? { metadata: e.metadata } : {}) }
}

function headOf(row: { incarnation: unknown; next: unknown; deletions: unknown }): TenantHead {
  return { incarnation: String(row.incarnation), next: Number(row.next), deletions: Number(row.deletions) }
}

function loggedOf(tenant: string, row: { label: unknown; id: unknown; session_id: unknown; len: unknown; record: Record_ }): LoggedEntry {
  const r = row.record
  const entry: MemoryEntry = {
    id: String(row.id),
    tenant,
    content: r.content,
    session_id: row.session_id === null ? null : String(row.session_id),
    turn: r.turn,
    seq: r.seq,
    created_at: r.created_at,
    ...(r.metadata ? { metadata: r.metadata } : {}),
  }
  return { label: Number(row.label), entry, len: Number(row.len) }
}
