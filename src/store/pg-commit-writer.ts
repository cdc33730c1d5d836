import type pg from 'pg'
import { BurrowError, claimLost, leaseLost, storeUnavailable } from '../core/errors.js'
import type { EventEnvelope } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { WriteHealth } from '../core/write-health.js'
import { isConnectionError, retryingDeadlocks } from './pg-pool.js'
import { commitOrderError } from './commit-order.js'
import { JOURNAL_ROW_SPAN, type IdempotencyWrite } from '../core/stores.js'
import { COMMIT_BATCH, commitBatchValues, type BatchEntry } from './pg-commit-batch.js'

/** One session's commits waiting for a batch, or in one: merged into one entry. */
interface Queued {
  sid: string
  tenant: string
  events: EventEnvelope[]
  snapshot: SessionRecord
  /** The fencing token of the newest commit merged in (they are one session's, made in order). */
  fence: number
  /** Idempotency outcomes written with the events. */
  outcomes: IdempotencyWrite[]
  settled: Promise<void>
  resolve: () => void
  reject: (err: unknown) => void
}

/** Batches written at once: the second lets one session's long write not hold up every other session's. */
const MAX_FLIGHTS = 2
/** Sessions per statement at most. */
const MAX_BATCH = 256

/**
 * The PostgreSQL write path: group commit at the session level, as on LMDB (lmdb-batch-writer.ts).
 * `commit()` queues; a batch — one statement (pg-commit-batch.ts) — writes every session queued
 * when it starts, so the sessions of a busy replica share one round trip, one transaction and one
 * WAL flush, and a session that committed several times meanwhile (a turn's start and its answer,
 * when the model answered first) writes once. At most {@link MAX_FLIGHTS} batches are in flight; a
 * session is in at most one of them (its seqs must land in order), and its commits made meanwhile
 * wait for the next.
 *
 * A session's write is all or nothing, and the other sessions of its batch do not depend on it. One
 * that fails rejects its commits and those queued behind it (their events no longer follow the stored
 * log); a connection failure is `STORE_UNAVAILABLE` for the whole batch and makes the store
 * unhealthy; a newer fencing token on the session is `STORE_UNAVAILABLE` with reason `lease_lost`
 * (another replica took the session over: errors.ts `leaseLost`); a log that does not end where the
 * entry starts, or a stored history other than the one it extends, is a conflict (an Error: INTERNAL).
 */
export class PgCommitWriter {
  /** Per session, its commits waiting for a batch. */
  private readonly pending = new Map<string, Queued>()
  /** Per session, its entry in a batch in flight (until that entry's outcome is known). */
  private readonly flying = new Map<string, Queued>()
  private readonly flights = new Set<Promise<void>>()
  /** Told of each write once committed (tenant, session, its first and last seq): the replicas' change feed. */
  onCommitted: ((tenant: string, sessionId: string, first: number, last: number) => void) | null = null

  constructor(
    private readonly pool: pg.Pool,
    private readonly health: WriteHealth,
    /** This replica's name in the leases table (its commits under a lease need the lease row to be its own). */
    private readonly owner: string,
  ) {}

  /** `fence`: the token of the session's lease the commit is made under (0: none). */
  commit(events: readonly EventEnvelope[], snapshot: SessionRecord, fence = 0, outcomes: readonly IdempotencyWrite[] = []): Promise<void> {
    const sid = snapshot.session_id
    if (events.length === 0) return this.settledFor(sid)
    const waiting = this.pending.get(sid)
    const ahead = waiting ?? this.flying.get(sid)
    const next = ahead ? ahead.events[ahead.events.length - 1]!.seq + 1 : events[0]!.seq
    const refused = commitOrderError(events, snapshot, next)
    if (refused) return Promise.reject(refused)
    if (waiting) {
      for (const e of events) waiting.events.push(e)
      for (const o of outcomes) waiting.outcomes.push(o)
      waiting.snapshot = snapshot
      waiting.fence = fence
      return waiting.settled
    }
    const q = queued(sid, events.slice(), snapshot, fence, outcomes.slice())
    this.pending.set(sid, q)
    this.pump()
    return q.settled
  }

  /** Resolves once the writes of `sid` started or queued so far have ended (either way). */
  async settledFor(sid: string): Promise<void> {
    // A waiting entry is written only after the one in flight ends, and is rejected if that one fails.
    const p = this.pending.get(sid)?.settled ?? this.flying.get(sid)?.settled
    if (p) await p.catch(() => undefined)
  }

  /** Resolves once every write started or queued so far has ended. */
  async idle(): Promise<void> {
    while (this.flights.size > 0) await Promise.allSettled([...this.flights])
  }

  /** Starts batches while fewer than MAX_FLIGHTS are in flight and some session waits with nothing in flight. */
  private pump(): void {
    while (this.flights.size < MAX_FLIGHTS) {
      const batch = this.take()
      if (batch.length === 0) return
      const flight = this.fly(batch)
        .catch((err: unknown) => {
          // Unexpected (a bug): the batch's commits still get an answer.
          for (const { q } of batch) if (this.flying.get(q.sid) === q) this.failed(q, err)
        })
        .finally(() => {
          this.flights.delete(flight)
          this.pump()
        })
      this.flights.add(flight)
    }
  }

  /**
   * The sessions of the next batch, moved from waiting to flying, each with its journal row's start:
   * a tenant's rows of one transaction share its span of stream ids (pg-tenant-journal.ts), so a
   * session whose events would not fit after its tenant's others waits for the next batch.
   */
  private take(): Array<BatchEntry & { q: Queued }> {
    const batch: Array<BatchEntry & { q: Queued }> = []
    const used = new Map<string, number>()
    for (const [sid, q] of this.pending) {
      if (batch.length >= MAX_BATCH) break
      if (this.flying.has(sid)) continue
      const start = used.get(q.tenant)
      const n = q.events.length
      if (start !== undefined && start + n > JOURNAL_ROW_SPAN - 1) continue
      used.set(q.tenant, (start ?? 0) + n)
      batch.push({ q, events: q.events, snapshot: q.snapshot, fence: q.fence, journalStart: start ?? 0, outcomes: q.outcomes })
    }
    for (const { q } of batch) {
      this.pending.delete(q.sid)
      this.flying.set(q.sid, q)
    }
    return batch
  }

  /** Writes a batch and settles each of its sessions' commits. */
  private async fly(batch: ReadonlyArray<BatchEntry & { q: Queued }>): Promise<void> {
    const entries: Array<BatchEntry & { q: Queued }> = []
    for (const e of batch) {
      const last = e.events[e.events.length - 1]!.seq
      if (e.snapshot.last_seq === last) entries.push(e)
      else this.failed(e.q, new Error(`snapshot of ${e.q.sid} is at seq ${e.snapshot.last_seq}, log at ${last}`))
    }
    if (entries.length === 0) return
    let written: Set<string>
    try {
      written = await this.write(entries)
    } catch (err) {
      if (err instanceof Conflict && entries.length > 1) {
        // Some session's events are already stored (this process had its log wrong): each alone tells which.
        await Promise.all(entries.map((e) => this.fly([e])))
        return
      }
      const e = err instanceof Conflict ? conflict(entries[0]!.q.sid, entries[0]!.events[0]!.seq) : err
      for (const { q } of entries) this.failed(q, e)
      return
    }
    await Promise.all(
      entries.map(async ({ q }) => {
        if (written.has(q.sid)) return this.succeeded(q)
        // A new session under an idempotency claim: not inserted, because the claim was taken over (pg-commit-batch.ts).
        if (q.events[0]!.seq === 1 && q.outcomes.some((o) => o.claim !== undefined)) return this.failed(q, claimLost())
        this.failed(q, await this.refusal(q.tenant, q.sid, q.events[0]!.seq, q.fence))
      }),
    )
  }

  private succeeded(q: Queued): void {
    this.flying.delete(q.sid)
    // Its listener catches its own failures (pg-session-repository.ts): the commit is durable either way.
    try {
      this.onCommitted?.(q.tenant, q.sid, q.events[0]!.seq, q.events[q.events.length - 1]!.seq)
    } finally {
      q.resolve()
    }
  }

  /** The session's entry failed: it and what waits behind it are rejected (their events no longer follow the stored log). */
  private failed(q: Queued, err: unknown): void {
    this.flying.delete(q.sid)
    q.reject(err)
    const behind = this.pending.get(q.sid)
    if (!behind) return
    this.pending.delete(q.sid)
    // Fenced out, the commits behind are too, for the same reason: they get the same answer.
    if (err instanceof BurrowError && err.data?.reason === 'lease_lost') return behind.reject(err)
    behind.reject(
      storeUnavailable(new Error(`an earlier write of the session failed (${(err as Error).message})`), `events of session ${q.sid}`),
    )
  }

  /** One statement for the batch; the sessions it wrote. */
  private async write(entries: readonly BatchEntry[]): Promise<Set<string>> {
    const values = commitBatchValues(entries, this.owner)
    const what = entries.length === 1 ? `events of session ${entries[0]!.snapshot.session_id}` : `events of ${entries.length} sessions`
    let r: pg.QueryResult
    try {
      r = await retryingDeadlocks(() => this.pool.query({ name: 'burrow_commit_batch', text: COMMIT_BATCH, values }))
    } catch (err) {
      if ((err as { code?: string }).code === '23505') throw new Conflict()
      if (isConnectionError(err)) this.health.failed(err)
      throw storeUnavailable(err, what)
    }
    this.health.succeeded()
    return new Set((r.rows as Array<{ session_id: string }>).map((row) => row.session_id))
  }

  /**
   * Why a write stored nothing: another replica's lease (a newer fencing token on the session's
   * row), or a log or history this process had wrong. One read, on this path only: the statement
   * itself cannot say which of its conditions failed. `fence` only grows, so a newer token read
   * after the refusal was there at the refusal or came after it — either way the session is
   * another replica's now, and none of this process's writes under its old token can land.
   */
  private async refusal(tenant: string, sid: string, first: number, fence: number): Promise<Error> {
    let row: { fence: string; last_seq: string; lease: string | null; owner: string | null } | undefined
    try {
      const r = await this.pool.query({ name: 'burrow_commit_refusal', text: REFUSAL, values: [tenant, sid] })
      row = r.rows[0] as typeof row
    } catch (err) {
      if (isConnectionError(err)) this.health.failed(err)
      return storeUnavailable(err, `events of session ${sid}`)
    }
    // A newer token, or (under a lease) a lease row that no longer holds this token for this replica: a
    // crashed database forgot the lease (and may have given its token again).
    const leased = fence === 0 || (Number(row?.lease ?? 0) === fence && row?.owner === this.owner)
    if (row && (Number(row.fence) > fence || !leased)) return leaseLost(sid)
    const at = row ? `seq ${row.last_seq}` : 'no session'
    return new Error(
      `commit out of order for ${sid}: the batch starts at seq ${first}, the stored log has ${at} (or the stored history is not the one the commit extends)`,
    )
  }
}

/** A batch's statement hit a unique key: some session's events are stored already. */
class Conflict extends Error {}

const REFUSAL = `SELECT s.fence, s.last_seq, l.token AS lease, l.owner FROM sessions s
  LEFT JOIN leases l ON l.tenant = s.tenant AND l.session_id = s.session_id WHERE s.tenant = $1 AND s.session_id = $2`

function conflict(sid: string, first: number): Error {
  return new Error(`commit out of order for ${sid}: the stored log already holds seq ${first} or after`)
}

function queued(sid: string, events: EventEnvelope[], snapshot: SessionRecord, fence: number, outcomes: IdempotencyWrite[]): Queued {
  let resolve!: () => void
  let reject!: (err: unknown) => void
  const settled = new Promise<void>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { sid, tenant: snapshot.config.tenant, events, snapshot, fence, outcomes, settled, resolve, reject }
}
