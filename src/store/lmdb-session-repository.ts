import type { EventEnvelope } from '../core/events.js'
import type { Message } from '../core/messages.js'
import type { SessionConfig, SessionNote, SessionRecord, TokenTotals } from '../core/session-record.js'
import type { IdempotencyStore, ProjectionState, SessionRepository } from '../core/stores.js'
import { toSummary } from '../core/views.js'
import type { Page, SessionQuery, SessionSummary } from '../core/wire.js'
import { decodeCursor, encodeCursor } from './cursor.js'
import { LmdbIdempotencyStore } from './lmdb-idempotency-store.js'
import { openLmdbEnv, type BurrowDbs, type LmdbEnv } from './lmdb-env.js'

/** The snapshot as stored: the record without what lives in other keys (configuration, notes, long lists). */
type Head = Omit<SessionRecord, 'config' | 'notes' | 'messages' | 'message_seqs' | 'message_turns' | 'usage_by_turn'> & {
  tenant: string; message_count: number; message_generation: number
  /** Usage of the open turn: its own row is written when the turn ends (one write less per step). */
  open_turn_usage?: TokenTotals & { turn: number }
}

/** What a commit needs to know of the stored state; kept per session after each commit (one writer per data dir). */
interface Known { lastSeq: number; messageCount: number; generation: number; status: string; running: boolean; marked: boolean }

const TOP = '\uffff' // sorts after every session id
const KNOWN_MAX = 50_000

/**
 * Sessions on LMDB. One commit = one child transaction: the events, the snapshot's
 * head, the messages and turn usage that changed, the list indexes, the running-turn
 * index and the projection's pending mark — all or nothing. Commits from concurrent
 * sessions share lmdb-js's batched write transaction (group commit). A commit resolves once
 * committed; with `fsync` durability `flushed()` then resolves once it is on disk, which is
 * what the service waits for before it acknowledges anything or publishes the events.
 */
export class LmdbSessionRepository implements SessionRepository {
  readonly idempotency: IdempotencyStore
  private readonly dbs: BurrowDbs
  private readonly known = new Map<string, Known>()

  private constructor(private readonly env: LmdbEnv, private readonly durability: 'fsync' | 'relaxed', idempotencyTtlMs: number) {
    this.dbs = env.dbs
    this.idempotency = new LmdbIdempotencyStore(env.dbs.idempotency, idempotencyTtlMs)
  }

  static async open(dataDir: string, opts: { durability: 'fsync' | 'relaxed'; idempotencyTtlMs: number }): Promise<LmdbSessionRepository> {
    return new LmdbSessionRepository(await openLmdbEnv(dataDir, opts.durability), opts.durability, opts.idempotencyTtlMs)
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
      const items = ids.slice(0, limit).map((id) => {
        const h = this.dbs.heads.get(id) as Head
        return toSummary({ ...h, config: this.dbs.configs.get(id) as SessionConfig })
      })
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
        const head = this.dbs.heads.get(sid) as Head | undefined
        if (head === undefined) return // deleted meanwhile
        this.dbs.checkpoints.put(sid, seq)
        if (head.last_seq <= seq) {
          this.dbs.pending.remove(sid)
          const k = this.known.get(sid)
          if (k) k.marked = false
        }
      })
    },
    pending: async () => [...this.dbs.pending.getKeys()] as string[],
    reset: async () => {
      await this.dbs.checkpoints.childTransaction(() => {
        for (const k of this.dbs.checkpoints.getKeys()) this.dbs.checkpoints.remove(k)
        for (const key of this.dbs.heads.getKeys()) this.dbs.pending.put(key as string, 1)
      })
      this.known.clear()
    },
  }

  async commit(events: readonly EventEnvelope[], snapshot: SessionRecord): Promise<void> {
    const sid = snapshot.session_id
    const d = this.dbs
    const next = await d.events.childTransaction((): Known => {
      const k = this.known.get(sid) ?? this.read(sid)
      let expected = (k?.lastSeq ?? 0) + 1
      for (const e of events) {
        if (e.session_id !== sid || e.seq !== expected) throw new Error(`commit out of order for ${sid}: expected seq ${expected}, got ${e.seq}`)
        d.events.put([sid, e.seq], e)
        expected++
      }
      if (snapshot.last_seq !== expected - 1) throw new Error(`snapshot of ${sid} is at seq ${snapshot.last_seq}, log at ${expected - 1}`)
      const tenant = snapshot.config.tenant
      if (!k) {
        d.configs.put(sid, snapshot.config)
        d.byTenant.put([tenant, sid], 1)
      }
      // Messages: appended; all rewritten when a compaction made a new generation.
      let from = 0
      if (k && k.generation === snapshot.compactions && k.messageCount <= snapshot.messages.length) from = k.messageCount
      else if (k) for (const key of d.messages.getKeys({ start: [sid, 0], end: [sid, Infinity] })) d.messages.remove(key)
      for (let i = from; i < snapshot.messages.length; i++) d.messages.put([sid, i], { m: snapshot.messages[i], s: snapshot.message_seqs[i], t: snapshot.message_turns[i] })
      // Usage rows of the closed turns these events touched (the list is in turn order: walk back from
      // its end); the open turn's usage rides in the head until it ends.
      const firstTurn = events[0]?.turn ?? Infinity
      const openTurn = snapshot.open_turn?.turn
      const usage = snapshot.usage_by_turn
      for (let i = usage.length - 1; i >= 0 && usage[i]!.turn >= firstTurn; i--) if (usage[i]!.turn !== openTurn) d.turnUsage.put([sid, usage[i]!.turn], usage[i])
      if (events.some((e) => e.type === 'note_set' || e.type === 'note_deleted')) d.notes.put(sid, snapshot.notes)
      if (!k || k.status !== snapshot.status) {
        if (k) d.byStatus.remove([tenant, k.status, sid])
        d.byStatus.put([tenant, snapshot.status, sid], 1)
      }
      const running = snapshot.open_turn?.state === 'running'
      if (running && !k?.running) d.running.put(sid, snapshot.open_turn!.turn)
      else if (!running && k?.running !== false) d.running.remove(sid)
      // The projector's mark, set once until it has caught up (it reads the target seq from the head).
      if (!k?.marked) d.pending.put(sid, 1)
      d.heads.put(sid, headOf(snapshot))
      return { lastSeq: snapshot.last_seq, messageCount: snapshot.messages.length, generation: snapshot.compactions, status: snapshot.status, running, marked: true }
    }).catch((err: unknown) => {
      this.known.delete(sid) // the stored state is whatever it is: read it again next time
      throw err
    })
    this.remember(sid, next)
  }

  private read(sid: string): Known | undefined {
    const h = this.dbs.heads.get(sid) as Head | undefined
    if (!h) return undefined
    return { lastSeq: h.last_seq, messageCount: h.message_count, generation: h.message_generation, status: h.status, running: h.open_turn?.state === 'running', marked: this.dbs.pending.get(sid) !== undefined }
  }

  private remember(sid: string, k: Known): void {
    this.known.delete(sid)
    this.known.set(sid, k)
    if (this.known.size > KNOWN_MAX) this.known.delete(this.known.keys().next().value as string)
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
      turns.push(v.t)
    }
    const usage = [...this.dbs.turnUsage.getRange({ start: [sid, 0], end: [sid, Infinity] })].map(({ value }) => value as TokenTotals & { turn: number })
    const { message_count: _c, message_generation: _g, tenant: _t, open_turn_usage: open, ...rest } = head
    if (open && !usage.some((u) => u.turn === open.turn)) usage.push(open)
    return {
      ...rest, config: this.dbs.configs.get(sid) as SessionConfig, notes: (this.dbs.notes.get(sid) as SessionNote[] | undefined) ?? [],
      messages, message_seqs: seqs, message_turns: turns, usage_by_turn: usage,
    }
  }

  async deleteSession(sessionId: string, tenant: string): Promise<void> {
    const d = this.dbs
    await d.events.childTransaction(() => {
      const head = d.heads.get(sessionId) as Head | undefined
      for (const k of d.events.getKeys({ start: [sessionId, 0], end: [sessionId, Infinity] })) d.events.remove(k)
      for (const k of d.messages.getKeys({ start: [sessionId, 0], end: [sessionId, Infinity] })) d.messages.remove(k)
      for (const k of d.turnUsage.getKeys({ start: [sessionId, 0], end: [sessionId, Infinity] })) d.turnUsage.remove(k)
      d.heads.remove(sessionId)
      d.configs.remove(sessionId)
      d.notes.remove(sessionId)
      d.byTenant.remove([tenant, sessionId])
      if (head) d.byStatus.remove([tenant, head.status, sessionId])
      d.running.remove(sessionId)
      d.checkpoints.remove(sessionId)
      d.pending.remove(sessionId)
    })
    this.known.delete(sessionId)
    await this.idempotency.deletePrefix(`${tenant}\u0000${sessionId}\u0000`)
    if (this.durability === 'fsync') await this.env.flushed()
  }

  /** With fsync durability: resolves once every commit so far is flushed to disk. */
  get flushed(): (() => Promise<void>) | undefined {
    return this.durability === 'fsync' ? () => this.env.flushed() : undefined
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
  const { config, notes: _n, messages, message_seqs: _s, message_turns: _t, usage_by_turn: usage, ...rest } = r
  const head: Head = { ...rest, tenant: config.tenant, message_count: messages.length, message_generation: r.compactions }
  const open = r.open_turn ? usage[usage.length - 1] : undefined
  if (open && open.turn === r.open_turn!.turn) head.open_turn_usage = open
  return head
}
