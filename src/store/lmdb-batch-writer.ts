import { storeUnavailable } from '../core/errors.js'
import type { EventEnvelope } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { IdempotencyWrite } from '../core/stores.js'
import type { BurrowDbs, LmdbEnv } from './lmdb-env.js'
import type { WriteHealth } from '../core/write-health.js'
import { applyWrites, json, purgeWrites, readKnown, sessionWrites, type Known, type Op } from './lmdb-layout.js'
import { commitOrderError } from './commit-order.js'
import { storedIdempotencyKey } from './idempotency-key.js'
import type { LmdbTenantJournal } from './lmdb-tenant-journal.js'

/** One session's writes waiting for the next batch: every event queued since the last batch, and the record after them. */
interface Queued {
  sid: string
  events: EventEnvelope[]
  snapshot: SessionRecord
  /** Idempotency outcomes written with the events. */
  outcomes: IdempotencyWrite[]
  settled: Promise<void>
  resolve: () => void
  reject: (err: unknown) => void
  failed?: Error
}

/** One batch: what it took from the queue and the stored state it wrote. */
interface Batch {
  queued: Map<string, Queued>
  written: Map<string, Known>
  /** Per tenant whose journal the batch appended to, the last position it gave out. */
  tenants: Map<string, number>
  /** With fsync durability: the flush of the transaction the batch was written in (taken inside it). */
  flushed?: Promise<void>
  settled: Promise<void>
  resolve: () => void
  reject: (err: unknown) => void
}

const KNOWN_MAX = 50_000

/**
 * The LMDB write path: group commit at the session level. `commit()` only queues; a batch —
 * one lmdb-js child transaction — writes every session queued when lmdb-js gets to it, so a
 * session that committed several times meanwhile (a turn's start and its answer, when the
 * model answered first) writes its head, messages and indexes once, and the commits of every
 * session share one LMDB transaction and, with fsync durability, one flush. A commit resolves
 * once its batch is as durable as the store's durability: committed (`relaxed`), or flushed to
 * disk (`fsync`: the flush of its own transaction, not of whatever was written since).
 *
 * A batch is all or nothing: a throw inside the child transaction aborts it, and nothing of it
 * is stored. A session whose queued events no longer follow its stored log (a batch before
 * failed) is refused alone; the others are written.
 */
export class LmdbBatchWriter {
  private queued = new Map<string, Queued>()
  private checkpoints = new Map<string, number>()
  private deletes = new Map<string, string>()
  /** The batch that takes what is queued now; null when nothing is queued. */
  private next: Batch | null = null
  /** Batches written and not yet committed. */
  private readonly inflight = new Set<Batch>()
  /** Per session, the promise of its writes not yet committed (reads of that session wait for it). */
  private readonly unsettled = new Map<string, Promise<void>>()
  private readonly known = new Map<string, Known>()

  /** `durable`: commits resolve once flushed to disk (fsync durability), not only committed. */
  constructor(
    private readonly env: LmdbEnv,
    private readonly durable: boolean,
    private readonly health?: WriteHealth,
    private readonly journal?: LmdbTenantJournal,
  ) {}

  private get dbs(): BurrowDbs {
    return this.env.dbs
  }

  /**
   * Queues events (consecutive seqs after the session's stored or queued ones) with the
   * record they produced. `snapshot` is read when the batch is written: it may be a live record
   * that later commits of the same session go on changing — those are queued too, so the
   * batch writes the record with every event applied to it.
   */
  commit(events: readonly EventEnvelope[], snapshot: SessionRecord, outcomes: readonly IdempotencyWrite[] = []): Promise<void> {
    const sid = snapshot.session_id
    const q = this.queued.get(sid)
    const refused = commitOrderError(events, snapshot, (q ? q.events[q.events.length - 1]!.seq : (this.knownOf(sid)?.lastSeq ?? 0)) + 1)
    if (refused) return Promise.reject(refused)
    if (q) {
      for (const e of events) q.events.push(e)
      for (const o of outcomes) q.outcomes.push(o)
      q.snapshot = snapshot
      return q.settled
    }
    let resolve!: () => void
    let reject!: (err: unknown) => void
    const settled = new Promise<void>((res, rej) => {
      resolve = res
      reject = rej
    })
    this.queued.set(sid, { sid, events: events.slice(), snapshot, outcomes: outcomes.slice(), settled, resolve, reject })
    this.unsettled.set(sid, settled)
    const clear = () => {
      if (this.unsettled.get(sid) === settled) this.unsettled.delete(sid)
    }
    settled.then(clear, clear)
    this.schedule()
    return settled
  }

  /** Records a projection checkpoint in the next batch (clearing the pending mark when nothing newer is stored). */
  checkpoint(sid: string, seq: number): Promise<void> {
    this.checkpoints.set(sid, Math.max(seq, this.checkpoints.get(sid) ?? 0))
    return this.schedule()
  }

  /** Purges a session in the next batch, after any writes of it queued before. */
  delete(sid: string, tenant: string): Promise<void> {
    this.deletes.set(sid, tenant)
    return this.schedule()
  }

  /** Resolves once the writes of `sid` queued so far are committed (or have failed). */
  async settledFor(sid: string): Promise<void> {
    const p = this.unsettled.get(sid)
    if (p) await p.catch(() => undefined)
  }

  /** Resolves once everything queued so far is committed (or has failed). */
  async idle(): Promise<void> {
    for (let b = this.next ?? first(this.inflight); b; b = this.next ?? first(this.inflight)) await b.settled.catch(() => undefined)
  }

  /** Forgets what is known of every session (after a change made outside this writer). */
  forgetAll(): void {
    this.known.clear()
  }

  private schedule(): Promise<void> {
    if (this.next) return this.next.settled
    let resolve!: () => void
    let reject!: (err: unknown) => void
    const settled = new Promise<void>((res, rej) => {
      resolve = res
      reject = rej
    })
    settled.catch(() => undefined) // commits learn of a failure through their own promises
    const batch: Batch = { queued: new Map(), written: new Map(), tenants: new Map(), settled, resolve, reject }
    this.next = batch
    // lmdb-js runs the callback when its write thread starts the next transaction: under load, after the
    // one being committed — meanwhile the sessions' next events join this batch.
    this.dbs.events
      .childTransaction(() => this.write(batch))
      .then(
        () => this.finish(batch),
        (err: unknown) => this.finish(batch, err),
      )
    return settled
  }

  /** Writes what is queued now (synchronously, inside the batch's child transaction: a throw aborts all of it). */
  private write(batch: Batch): void {
    const { queued, checkpoints, deletes } = this
    if (this.next === batch) this.next = null
    this.queued = new Map()
    this.checkpoints = new Map()
    this.deletes = new Map()
    batch.queued = queued
    this.inflight.add(batch)
    applyWrites(this.plan(batch, checkpoints, deletes))
    // Known before the transaction commits, so the next batch (possibly in the same transaction) follows on.
    for (const [sid, k] of batch.written) this.remember(sid, k)
    // Taken now, inside the transaction: the flush of this transaction (lmdb-js replaces it when the next one starts).
    if (this.durable) batch.flushed = this.env.flushed()
  }

  private finish(batch: Batch, err?: unknown): void {
    if (err === undefined && batch.flushed) {
      const flushed = batch.flushed
      // Kept on the batch while it waits, so a failure of a later batch can end the wait (see below).
      flushed.then(
        () => {
          if (batch.flushed === flushed) {
            delete batch.flushed
            this.finish(batch)
          }
        },
        (e: unknown) => {
          if (batch.flushed === flushed) {
            delete batch.flushed
            this.finish(batch, e)
          }
        },
      )
      return
    }
    if (!this.inflight.has(batch) && this.next !== batch) return // already finished
    this.inflight.delete(batch)
    if (this.next === batch) {
      // The callback never ran (the environment is closing): what it would have written is still queued.
      this.next = null
      batch.queued = this.queued
      this.queued = new Map()
      this.checkpoints = new Map()
      this.deletes = new Map()
      err ??= new Error('the session store is closed')
    }
    if (err === undefined) {
      this.health?.succeeded()
      this.journal?.advanced(batch.tenants)
      for (const q of batch.queued.values()) {
        if (q.failed) {
          this.known.delete(q.sid)
          q.reject(q.failed)
        } else q.resolve()
      }
      batch.resolve()
      return
    }
    // Aborted, or the transaction failed to commit (disk full, I/O error): nothing of the batch is stored.
    const failure = storeUnavailable(err, 'session events')
    this.health?.failed(err)
    this.journal?.forget(batch.tenants.keys())
    for (const q of batch.queued.values()) {
      this.known.delete(q.sid)
      q.reject(failure)
    }
    for (const sid of batch.written.keys()) this.known.delete(sid)
    batch.reject(failure)
    // lmdb-js drops the flush resolvers of the transactions around a failed commit: a batch still waiting
    // for its flush may never hear of it. Its durability is unknown, so it is not acknowledged (what it
    // wrote is read back from the store by whoever loads those sessions next).
    for (const other of [...this.inflight]) {
      if (other.flushed) {
        delete other.flushed
        this.finish(other, err)
      }
    }
  }

  /** The batch's writes, checked and serialized; `batch.written` gets the stored state they leave. */
  private plan(batch: Batch, checkpoints: Map<string, number>, deletes: Map<string, string>): Op[] {
    const ops: Op[] = []
    const written = batch.written
    for (const q of batch.queued.values()) {
      const k = this.knownOf(q.sid)
      const next = (k?.lastSeq ?? 0) + 1
      // A batch before this one failed after these events were queued: they no longer follow the log.
      if (q.events[0]!.seq !== next) {
        q.failed = storeUnavailable(
          new Error(`an earlier write failed: expected seq ${next}, got ${q.events[0]!.seq}`),
          `events of session ${q.sid}`,
        )
        continue
      }
      written.set(q.sid, sessionWrites(this.dbs, q.events, q.snapshot, k, ops))
      for (const o of q.outcomes) ops.push({ db: this.dbs.idempotency, key: storedIdempotencyKey(o.key), value: json(o.record) })
      if (this.journal) {
        const tenant = q.snapshot.config.tenant
        batch.tenants.set(tenant, this.journal.append(tenant, q.sid, q.events, ops))
      }
    }
    const d = this.dbs
    for (const [sid, seq] of checkpoints) {
      const k = written.get(sid) ?? this.knownOf(sid)
      if (!k) continue // deleted meanwhile
      ops.push({ db: d.checkpoints, key: sid, value: json(seq) })
      if (k.lastSeq <= seq && k.marked) {
        ops.push({ db: d.pending, key: sid })
        written.set(sid, { ...k, marked: false })
      }
    }
    for (const [sid, tenant] of deletes) {
      purgeWrites(this.dbs, sid, tenant, written.get(sid) ?? this.knownOf(sid), ops)
      written.delete(sid)
      this.known.delete(sid)
    }
    return ops
  }

  /** The stored state of a session: as this writer left it, else read from its head. */
  private knownOf(sid: string): Known | undefined {
    return this.known.get(sid) ?? readKnown(this.dbs, sid)
  }

  private remember(sid: string, k: Known): void {
    this.known.delete(sid)
    this.known.set(sid, k)
    if (this.known.size > KNOWN_MAX) this.known.delete(this.known.keys().next().value as string)
  }
}

function first<T>(set: Set<T>): T | undefined {
  for (const x of set) return x
  return undefined
}
