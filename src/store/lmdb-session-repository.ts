import type { EventEnvelope } from '../core/events.js'
import type { Message } from '../core/messages.js'
import type { SessionRecord, TokenTotals } from '../core/session-record.js'
import type { IdempotencyStore, ProjectionState, SessionRepository } from '../core/stores.js'
import { toSummary } from '../core/views.js'
import type { Page, SessionQuery, SessionSummary } from '../core/wire.js'
import { decodeCursor, encodeCursor } from './cursor.js'
import { LmdbIdempotencyStore } from './lmdb-idempotency-store.js'
import { openLmdbEnv, type BurrowDbs, type LmdbEnv } from './lmdb-env.js'

/** The snapshot as stored: the record without its long lists, which live in their own keys. */
type Head = Omit<SessionRecord, 'messages' | 'message_seqs' | 'message_turns' | 'usage_by_turn'> & { message_count: number; message_generation: number }

const TOP = '\uffff' // sorts after every session id

/**
 * Sessions on LMDB. One commit = one child transaction: the events, the snapshot's
 * head, the messages and turn usage that changed, the list indexes, the running-turn
 * index and the projection's pending mark — all or nothing. Commits from concurrent
 * sessions share lmdb-js's batched write transaction (group commit); with `fsync`
 * durability a commit resolves only once the batch is flushed to disk.
 */
export class LmdbSessionRepository implements SessionRepository {
  readonly idempotency: IdempotencyStore
  private readonly dbs: BurrowDbs

  private constructor(private readonly env: LmdbEnv, private readonly durability: 'fsync' | 'relaxed', idempotencyTtlMs: number) {
    this.dbs = env.dbs
    this.idempotency = new LmdbIdempotencyStore(env.dbs.idempotency, idempotencyTtlMs)
  }

  static async open(dataDir: string, opts: { durability: 'fsync' | 'relaxed'; idempotencyTtlMs: number }): Promise<LmdbSessionRepository> {
    return new LmdbSessionRepository(await openLmdbEnv(dataDir), opts.durability, opts.idempotencyTtlMs)
  }

  readonly events = {
    readAfter: async (sessionId: string, after: number, upTo = Infinity, limit?: number): Promise<EventEnvelope[]> => {
      const range = this.dbs.events.getRange({ start: [sessionId, after + 1], end: [sessionId, upTo === Infinity ? Infinity : upTo + 1], ...(limit ? { limit } : {}) })
      return [...range].map(({ value }) => value as EventEnvelope)
    },
    lastSeq: async (sessionId: string): Promise<number> => (this.dbs.heads.get(sessionId) as Head | undefined)?.last_seq ?? 0,
  }

  readonly sessions = {
    get: async (sessionId: string): Promise<SessionRecord | undefined> => this.load(sessionId),
    list: async (tenant: string, q: SessionQuery): Promise<Page<SessionSummary>> => {
      const after = decodeCursor(q.cursor)
      const limit = q.limit ?? 20
      const ids: string[] = []
      const keys = q.status
        ? this.dbs.byStatus.getKeys({ start: [tenant, q.status, after ?? TOP], end: [tenant, q.status, ''], reverse: true })
        : this.dbs.byTenant.getKeys({ start: [tenant, after ?? TOP], end: [tenant, ''], reverse: true })
      for (const k of keys) {
        const id = k[k.length - 1] as string
        if (id === after) continue
        ids.push(id)
        if (ids.length > limit) break
      }
      const items = ids.slice(0, limit).map((id) => toSummary(this.dbs.heads.get(id) as Head))
      return { items, next_cursor: ids.length > limit ? encodeCursor(items.at(-1)!.session_id) : null }
    },
    runningTurns: async (): Promise<string[]> => [...this.dbs.running.getKeys()] as string[],
    allIds: (): AsyncIterable<string> => {
      const keys = this.dbs.heads.getKeys()
      return (async function* () { for (const k of keys) yield k as string })()
    },
  }

  readonly projection: ProjectionState = {
    checkpoint: async (sid) => (this.dbs.checkpoints.get(sid) as number | undefined) ?? 0,
    projected: async (sid, seq) => {
      await this.dbs.checkpoints.childTransaction(() => {
        if (this.dbs.heads.get(sid) === undefined) return // deleted meanwhile
        this.dbs.checkpoints.put(sid, seq)
        const pending = this.dbs.pending.get(sid) as number | undefined
        if (pending !== undefined && pending <= seq) this.dbs.pending.remove(sid)
      })
    },
    pending: async () => [...this.dbs.pending.getKeys()] as string[],
    reset: async () => {
      await this.dbs.checkpoints.childTransaction(() => {
        for (const k of this.dbs.checkpoints.getKeys()) this.dbs.checkpoints.remove(k)
        for (const { key, value } of this.dbs.heads.getRange()) this.dbs.pending.put(key as string, (value as Head).last_seq)
      })
    },
  }

  async commit(events: readonly EventEnvelope[], snapshot: SessionRecord): Promise<void> {
    const sid = snapshot.session_id
    const d = this.dbs
    await d.events.childTransaction(() => {
      const head = d.heads.get(sid) as Head | undefined
      let expected = (head?.last_seq ?? 0) + 1
      for (const e of events) {
        if (e.session_id !== sid || e.seq !== expected) throw new Error(`commit out of order for ${sid}: expected seq ${expected}, got ${e.seq}`)
        d.events.put([sid, e.seq], e)
        expected++
      }
      if (snapshot.last_seq !== expected - 1) throw new Error(`snapshot of ${sid} is at seq ${snapshot.last_seq}, log at ${expected - 1}`)
      this.writeMessages(sid, head, snapshot)
      const turns = new Set(events.map((e) => e.turn))
      for (const u of snapshot.usage_by_turn) if (turns.has(u.turn)) d.turnUsage.put([sid, u.turn], u)
      const tenant = snapshot.config.tenant
      if (!head) d.byTenant.put([tenant, sid], 1)
      if (!head || head.status !== snapshot.status) {
        if (head) d.byStatus.remove([tenant, head.status, sid])
        d.byStatus.put([tenant, snapshot.status, sid], 1)
      }
      if (snapshot.open_turn?.state === 'running') d.running.put(sid, snapshot.open_turn.turn)
      else if (head?.open_turn?.state === 'running') d.running.remove(sid)
      d.pending.put(sid, snapshot.last_seq)
      d.heads.put(sid, headOf(snapshot))
    })
    if (this.durability === 'fsync') await this.env.flushed()
  }

  /** Appends new messages; rewrites them all when compaction replaced the history (a new generation). */
  private writeMessages(sid: string, head: Head | undefined, r: SessionRecord): void {
    const d = this.dbs
    let from = 0
    if (head && head.message_generation === r.compactions && head.message_count <= r.messages.length) {
      from = head.message_count
    } else if (head) {
      for (const k of d.messages.getKeys({ start: [sid, 0], end: [sid, Infinity] })) d.messages.remove(k)
    }
    for (let i = from; i < r.messages.length; i++) d.messages.put([sid, i], { m: r.messages[i], s: r.message_seqs[i], t: r.message_turns[i] })
  }

  private load(sid: string): SessionRecord | undefined {
    const head = this.dbs.heads.get(sid) as Head | undefined
    if (!head) return undefined
    const messages: Message[] = []
    const seqs: number[] = []
    const turns: number[] = []
    for (const { value } of this.dbs.messages.getRange({ start: [sid, 0], end: [sid, Infinity] })) {
      const v = value as { m: Message; s: number; t: number }
      messages.push(v.m)
      seqs.push(v.s)
      turns.push(v.t ?? 0)
    }
    const usage = [...this.dbs.turnUsage.getRange({ start: [sid, 0], end: [sid, Infinity] })].map(({ value }) => value as TokenTotals & { turn: number })
    const { message_count: _c, message_generation: _g, ...rest } = head
    const older = rest as Partial<Head> // heads written before notes existed
    return { ...rest, notes: older.notes ?? [], messages, message_seqs: seqs, message_turns: turns, usage_by_turn: usage }
  }

  async deleteSession(sessionId: string, tenant: string): Promise<void> {
    const d = this.dbs
    await d.events.childTransaction(() => {
      const head = d.heads.get(sessionId) as Head | undefined
      for (const k of d.events.getKeys({ start: [sessionId, 0], end: [sessionId, Infinity] })) d.events.remove(k)
      for (const k of d.messages.getKeys({ start: [sessionId, 0], end: [sessionId, Infinity] })) d.messages.remove(k)
      for (const k of d.turnUsage.getKeys({ start: [sessionId, 0], end: [sessionId, Infinity] })) d.turnUsage.remove(k)
      d.heads.remove(sessionId)
      d.byTenant.remove([tenant, sessionId])
      if (head) d.byStatus.remove([tenant, head.status, sessionId])
      d.running.remove(sessionId)
      d.checkpoints.remove(sessionId)
      d.pending.remove(sessionId)
    })
    await this.idempotency.deletePrefix(`${tenant}\u0000${sessionId}\u0000`)
    if (this.durability === 'fsync') await this.env.flushed()
  }

  /** Drops idempotency records older than their TTL. */
  sweepIdempotency(): Promise<number> {
    return (this.idempotency as LmdbIdempotencyStore).sweep()
  }

  close(): Promise<void> {
    return this.env.close()
  }
}

function headOf(r: SessionRecord): Head {
  const { messages, message_seqs: _s, message_turns: _t, usage_by_turn: _u, ...rest } = r
  return { ...rest, message_count: messages.length, message_generation: r.compactions }
}
