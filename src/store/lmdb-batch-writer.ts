import type { EventEnvelope } from '../core/events.js'
import type { SessionRecord, TokenTotals } from '../core/session-record.js'
import { asBinary, type Database, type Key } from 'lmdb'
import type { BurrowDbs, LmdbEnv } from './lmdb-env.js'

export type TurnUsage = TokenTotals & { turn: number }

/** A turn's usage as stored: `[turn, input_tokens, output_tokens, compaction_tokens]` (a fifth of the object's JSON). */
export type UsageTuple = [number, number, number, number]

export function toTuple(u: TurnUsage): UsageTuple {
  return [u.turn, u.input_tokens, u.output_tokens, u.compaction_tokens]
}

export function fromTuple(t: UsageTuple): TurnUsage {
  return { turn: t[0], input_tokens: t[1], output_tokens: t[2], compaction_tokens: t[3] }
}

/** The snapshot as stored: the record without what lives in other keys (configuration, notes, long lists). */
export type Head = Omit<SessionRecord, 'config' | 'notes' | 'messages' | 'message_seqs' | 'message_turns' | 'usage_by_turn'> & {
  tenant: string; message_count: number; message_generation: number
  /** The log row from which the current history's messages are read (the row of the last compaction, or the first). */
  messages_from: number
  /** Usage of the turns of the last usage chunk (the one still filling): it rides in the head, so a turn writes no row of its own. */
  usage_tail: UsageTuple[]
}

/** Turns per row of the turn-usage database (`[sid, chunk] → usage of turns chunk·N+1 … chunk·N+N`). */
export const USAGE_CHUNK = 16

export function usageChunk(turn: number): number {
  return Math.floor((turn - 1) / USAGE_CHUNK)
}

/**
 * A row of the log database (`[sid, first seq]`): the consecutive events one batch appended to a
 * session, and the history messages they appended (`m.i` = index of the first; 0 after a compaction,
 * whose row carries the whole rebuilt history). Events and the snapshot's messages share one write.
 */
export interface LogRow {
  e: EventEnvelope[]
  m?: { i: number; m: SessionRecord['messages']; s: number[]; t: number[] }
}

/** What a batch needs to know of a session's stored state; kept per session after each write (one writer per data dir). */
interface Known {
  lastSeq: number; messageCount: number; generation: number; messagesFrom: number
  status: string; running: boolean; marked: boolean; usageChunk: number
}

/** One session's writes waiting for the next batch: every event queued since the last batch, and the record after them. */
interface Queued {
  sid: string
  events: EventEnvelope[]
  snapshot: SessionRecord
  settled: Promise<void>
  resolve: () => void
  reject: (err: unknown) => void
  failed?: Error
}

/** One write of a batch: a serialized value, or a removal. */
interface Op { db: Database<unknown, any>; key: Key; value?: Buffer }

/** One batch: what it took from the queue and the stored state it wrote. */
interface Batch {
  queued: Map<string, Queued>; written: Map<string, Known>
  /** With fsync durability: the flush of the transaction the batch was written in (taken inside it). */
  flushed?: Promise<void>
  settled: Promise<void>; resolve: () => void; reject: (err: unknown) => void
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
  constructor(private readonly env: LmdbEnv, private readonly durable: boolean) {}

  private get dbs(): BurrowDbs { return this.env.dbs }

  /**
   * Queues events (consecutive seqs after the session's stored or queued ones) with the
   * record they produced. `snapshot` is read when the batch is written: it may be a live record
   * that later commits of the same session go on changing — those are queued too, so the
   * batch writes the record with every event applied to it.
   */
  commit(events: readonly EventEnvelope[], snapshot: SessionRecord): Promise<void> {
    const sid = snapshot.session_id
    const q = this.queued.get(sid)
    let expected = (q ? q.events[q.events.length - 1]!.seq : this.knownOf(sid)?.lastSeq ?? 0) + 1
    for (const e of events) {
      if (e.session_id !== sid || e.seq !== expected) return Promise.reject(new Error(`commit out of order for ${sid}: expected seq ${expected}, got ${e.seq}`))
      expected++
    }
    if (snapshot.last_seq !== expected - 1) return Promise.reject(new Error(`snapshot of ${sid} is at seq ${snapshot.last_seq}, log at ${expected - 1}`))
    if (q) {
      for (const e of events) q.events.push(e)
      q.snapshot = snapshot
      return q.settled
    }
    let resolve!: () => void
    let reject!: (err: unknown) => void
    const settled = new Promise<void>((res, rej) => { resolve = res; reject = rej })
    this.queued.set(sid, { sid, events: events.slice(), snapshot, settled, resolve, reject })
    this.unsettled.set(sid, settled)
    const clear = () => { if (this.unsettled.get(sid) === settled) this.unsettled.delete(sid) }
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
  forgetAll(): void { this.known.clear() }

  private schedule(): Promise<void> {
    if (this.next) return this.next.settled
    let resolve!: () => void
    let reject!: (err: unknown) => void
    const settled = new Promise<void>((res, rej) => { resolve = res; reject = rej })
    settled.catch(() => undefined) // commits learn of a failure through their own promises
    const batch: Batch = { queued: new Map(), written: new Map(), settled, resolve, reject }
    this.next = batch
    // lmdb-js runs the callback when its write thread starts the next transaction: under load, after the
    // one being committed — meanwhile the sessions' next events join this batch.
    this.dbs.events.childTransaction(() => this.write(batch)).then(() => this.finish(batch), (err: unknown) => this.finish(batch, err))
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
    for (const op of this.plan(batch, checkpoints, deletes)) {
      if (op.value === undefined) op.db.remove(op.key)
      else op.db.put(op.key, asBinary(op.value))
    }
    // Known before the transaction commits, so the next batch (possibly in the same transaction) follows on.
    for (const [sid, k] of batch.written) this.remember(sid, k)
    // Taken now, inside the transaction: the flush of this transaction (lmdb-js replaces it when the next one starts).
    if (this.durable) batch.flushed = this.env.flushed()
  }

  private finish(batch: Batch, err?: unknown): void {
    if (err === undefined && batch.flushed) {
      const flushed = batch.flushed
      delete batch.flushed
      flushed.then(() => this.finish(batch), (e: unknown) => this.finish(batch, e))
      return
    }
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
      for (const q of batch.queued.values()) {
        if (q.failed) { this.known.delete(q.sid); q.reject(q.failed) } else q.resolve()
      }
      batch.resolve()
      return
    }
    // Aborted, or the transaction failed to commit: nothing of the batch is stored.
    for (const q of batch.queued.values()) { this.known.delete(q.sid); q.reject(err) }
    for (const sid of batch.written.keys()) this.known.delete(sid)
    batch.reject(err)
  }

  /** The batch's writes, checked and serialized; `batch.written` gets the stored state they leave. */
  private plan(batch: Batch, checkpoints: Map<string, number>, deletes: Map<string, string>): Op[] {
    const ops: Op[] = []
    const written = batch.written
    for (const q of batch.queued.values()) {
      const k = this.knownOf(q.sid)
      const next = (k?.lastSeq ?? 0) + 1
      // A batch before this one failed after these events were queued: they no longer follow the log.
      if (q.events[0]!.seq !== next) { q.failed = new Error(`commit out of order for ${q.sid}: expected seq ${next}, got ${q.events[0]!.seq}`); continue }
      written.set(q.sid, this.writeSession(q, k, ops))
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
      this.purge(sid, tenant, written.get(sid) ?? this.knownOf(sid), ops)
      written.delete(sid)
      this.known.delete(sid)
    }
    return ops
  }

  private writeSession(q: Queued, k: Known | undefined, ops: Op[]): Known {
    const d = this.dbs
    const sid = q.sid
    const s = q.snapshot
    if (s.last_seq !== q.events[q.events.length - 1]!.seq) throw new Error(`snapshot of ${sid} is at seq ${s.last_seq}, log at ${q.events[q.events.length - 1]!.seq}`)
    const tenant = s.config.tenant
    if (!k) {
      ops.push({ db: d.configs, key: sid, value: json(s.config) })
      ops.push({ db: d.byTenant, key: [tenant, sid], value: ONE })
    }
    // The events, with the messages they appended; the whole history when a compaction made a new generation.
    const first = q.events[0]!.seq
    const row: LogRow = { e: q.events }
    let messagesFrom = k?.messagesFrom ?? first
    let from = k ? k.messageCount : 0
    if (k && (k.generation !== s.compactions || k.messageCount > s.messages.length)) {
      from = 0
      messagesFrom = first
    }
    if (from < s.messages.length || messagesFrom === first) {
      row.m = { i: from, m: s.messages.slice(from), s: s.message_seqs.slice(from), t: s.message_turns.slice(from) }
    }
    ops.push({ db: d.events, key: [sid, first], value: json(row) })
    // Usage by turn: the last chunk rides in the head; a row is written for each earlier chunk these events
    // touched (a turn's usage only changes through events of that turn) and for chunks the head has left.
    const usage = s.usage_by_turn
    const tail = usage.length > 0 ? usageChunk(usage[usage.length - 1]!.turn) : 0
    const firstChunk = Math.min(usageChunk(Math.max(1, q.events[0]!.turn)), k?.usageChunk ?? tail)
    if (firstChunk < tail) {
      let i = usage.length
      while (i > 0 && usageChunk(usage[i - 1]!.turn) >= firstChunk) i--
      for (let c = firstChunk; c < tail; c++) {
        const rows: UsageTuple[] = []
        while (i < usage.length && usageChunk(usage[i]!.turn) === c) rows.push(toTuple(usage[i++]!))
        if (rows.length > 0) ops.push({ db: d.turnUsage, key: [sid, c], value: json(rows) })
      }
    }
    if (q.events.some((e) => e.type === 'note_set' || e.type === 'note_deleted')) ops.push({ db: d.notes, key: sid, value: json(s.notes) })
    if (!k || k.status !== s.status) {
      if (k) ops.push({ db: d.byStatus, key: [tenant, k.status, sid] })
      ops.push({ db: d.byStatus, key: [tenant, s.status, sid], value: ONE })
    }
    const running = s.open_turn?.state === 'running'
    if (running && !k?.running) ops.push({ db: d.running, key: sid, value: json(s.open_turn!.turn) })
    else if (!running && k?.running !== false) ops.push({ db: d.running, key: sid })
    // The projector's mark, set once until it has caught up (it reads the target seq from the head).
    if (!k?.marked) ops.push({ db: d.pending, key: sid, value: ONE })
    ops.push({ db: d.heads, key: sid, value: json(headOf(s, messagesFrom)) })
    return {
      lastSeq: s.last_seq, messageCount: s.messages.length, generation: s.compactions, messagesFrom,
      status: s.status, running, marked: true, usageChunk: tail,
    }
  }

  private purge(sid: string, tenant: string, k: Known | undefined, ops: Op[]): void {
    const d = this.dbs
    for (const db of [d.events, d.turnUsage]) for (const key of db.getKeys({ start: [sid, 0], end: [sid, Infinity] })) ops.push({ db, key })
    for (const db of [d.heads, d.configs, d.notes, d.running, d.checkpoints, d.pending]) ops.push({ db, key: sid })
    ops.push({ db: d.byTenant, key: [tenant, sid] })
    if (k) ops.push({ db: d.byStatus, key: [tenant, k.status, sid] })
  }

  /** The stored state of a session: as this writer left it, else read from its head. */
  private knownOf(sid: string): Known | undefined {
    const k = this.known.get(sid)
    if (k) return k
    const h = this.dbs.heads.get(sid) as Head | undefined
    if (!h) return undefined
    return {
      lastSeq: h.last_seq, messageCount: h.message_count, generation: h.message_generation, messagesFrom: h.messages_from, status: h.status,
      running: h.open_turn?.state === 'running', marked: this.dbs.pending.get(sid) !== undefined,
      usageChunk: h.usage_tail.length > 0 ? usageChunk(h.usage_tail[0]![0]) : 0,
    }
  }

  private remember(sid: string, k: Known): void {
    this.known.delete(sid)
    this.known.set(sid, k)
    if (this.known.size > KNOWN_MAX) this.known.delete(this.known.keys().next().value as string)
  }
}

/** The head of a record: its scalar state, named field by field (cheaper than copying the record and deleting). */
export function headOf(r: SessionRecord, messagesFrom: number): Head {
  const usage = r.usage_by_turn
  let i = usage.length
  if (i > 0) {
    const tail = usageChunk(usage[i - 1]!.turn)
    while (i > 0 && usageChunk(usage[i - 1]!.turn) === tail) i--
  }
  return {
    session_id: r.session_id, created_at: r.created_at, updated_at: r.updated_at, status: r.status, turn_count: r.turn_count,
    last_seq: r.last_seq, usage: r.usage, tool_stats: r.tool_stats, open_turn: r.open_turn, last_input_tokens: r.last_input_tokens,
    history_chars: r.history_chars, session_boundary_index: r.session_boundary_index,
    last_compaction_boundary_index: r.last_compaction_boundary_index, compactions: r.compactions,
    tenant: r.config.tenant, message_count: r.messages.length, message_generation: r.compactions, messages_from: messagesFrom,
    usage_tail: usage.slice(i).map(toTuple),
  }
}

function first<T>(set: Set<T>): T | undefined {
  for (const x of set) return x
  return undefined
}

/** Values are JSON (the environment's encoding); serialized here, before a batch's first put. */
function json(v: unknown): Buffer {
  return Buffer.from(JSON.stringify(v))
}

const ONE = json(1)
