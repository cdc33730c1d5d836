import type { EventEnvelope } from '../core/events.js'
import type { Message } from '../core/messages.js'
import type { SessionConfig, SessionNote, SessionRecord } from '../core/session-record.js'
import type { IdempotencyStore, IdempotencyWrite, ProjectionState, SessionRepository } from '../core/stores.js'
import { toSummary } from '../core/views.js'
import type { Page, SessionQuery, SessionSummary } from '../core/wire.js'
import { FILTER_SCAN_BUDGET, hasSessionFilter, matchesSession } from '../core/session-filter.js'
import { decodeCursor, encodeCursor } from './cursor.js'
import { LmdbIdempotencyStore } from './lmdb-idempotency-store.js'
import { LmdbBatchWriter } from './lmdb-batch-writer.js'
import { LmdbTenantJournal } from './lmdb-tenant-journal.js'
import { WriteHealth } from '../core/write-health.js'
import { lmdbProbe } from './lmdb-probe.js'
import { fromTuple, rowEvents, rowMessages, usageChunk, type Head, type LogRow, type TurnUsage, type UsageTuple } from './lmdb-layout.js'
import { openLmdbEnv, type BurrowDbs, type LmdbEnv } from './lmdb-env.js'
import type { Fold, Migrated } from './lmdb-migrate.js'

const TOP = '\uffff' // sorts after every session id

/**
 * Sessions on LMDB. A commit writes the events, the snapshot's head, the messages and turn
 * usage that changed, the list indexes, the running-turn index and the projection's pending
 * mark — all or nothing, in batches that group the commits of every session queued meanwhile
 * (LmdbBatchWriter). A commit resolves once committed, and with `fsync` durability once it is on
 * disk: what the service waits for before it acknowledges anything or publishes the events.
 */
export class LmdbSessionRepository implements SessionRepository {
  readonly idempotency: IdempotencyStore
  readonly journal: LmdbTenantJournal
  private readonly dbs: BurrowDbs
  private readonly writer: LmdbBatchWriter
  private readonly health: WriteHealth

  private constructor(
    private readonly env: LmdbEnv,
    private readonly durability: 'fsync' | 'relaxed',
    idempotencyTtlMs: number,
    onHealth?: (writable: boolean, err?: unknown) => void,
    journalKeep?: number,
  ) {
    this.dbs = env.dbs
    this.health = new WriteHealth(lmdbProbe(env.dbs.meta), onHealth)
    this.journal = new LmdbTenantJournal(env.dbs, journalKeep)
    this.writer = new LmdbBatchWriter(env, durability === 'fsync', this.health, this.journal)
    this.idempotency = new LmdbIdempotencyStore(env.dbs.idempotency, idempotencyTtlMs, this.health)
  }

  /** `fold` (the session reducer) lets opening upgrade a directory of an older schema by replaying its logs. */
  static async open(
    dataDir: string,
    opts: {
      durability: 'fsync' | 'relaxed'
      idempotencyTtlMs: number
      fold?: Fold
      /** Told when writes start failing (with the error) and when they work again. */
      onHealth?: (writable: boolean, err?: unknown) => void
      /** Tenant journal rows kept per tenant (default JOURNAL_KEEP; tests prune sooner). */
      journalKeep?: number
    },
  ): Promise<LmdbSessionRepository> {
    return new LmdbSessionRepository(
      await openLmdbEnv(dataDir, opts.durability, opts.fold),
      opts.durability,
      opts.idempotencyTtlMs,
      opts.onHealth,
      opts.journalKeep,
    )
  }

  writable(): boolean {
    return this.health.writable
  }

  /** Sessions outlive the process here. */
  requirePersistence(): void {}

  /** What opening upgraded, if it did. */
  get migrated(): Migrated | undefined {
    return this.env.migrated
  }

  readonly events = {
    readAfter: async (sessionId: string, after: number, upTo = Infinity, limit = Infinity): Promise<EventEnvelope[]> => {
      await this.writer.settledFor(sessionId)
      const out: EventEnvelope[] = []
      if (limit <= 0 || upTo <= after) return out
      // Rows hold consecutive events from their key's seq on: start at the row holding `after + 1`.
      const first = this.dbs.events.getKeys({ start: [sessionId, after + 1], end: [sessionId, 0], reverse: true, limit: 1 })
      let start: [string, number] = [sessionId, after + 1]
      for (const k of first) start = k as [string, number]
      for (const { value } of this.dbs.events.getRange({ start, end: [sessionId, upTo === Infinity ? Infinity : upTo + 1] })) {
        for (const e of rowEvents(sessionId, value as LogRow)) {
          if (e.seq <= after) continue
          if (e.seq > upTo || out.length >= limit) return out
          out.push(e)
        }
      }
      return out
    },
    lastSeq: async (sessionId: string): Promise<number> => {
      await this.writer.settledFor(sessionId)
      return (this.dbs.heads.get(sessionId) as Head | undefined)?.last_seq ?? 0
    },
  }

  readonly sessions = {
    get: async (sessionId: string): Promise<SessionRecord | undefined> => {
      await this.writer.settledFor(sessionId)
      return this.load(sessionId)
    },
    /**
     * One point lookup of a small record (`tenants`, never the configuration), so another tenant's
     * session costs what an unknown id costs, however large its system prompt. Only a session not
     * stored yet waits for its writes: one whose first commit is in flight, whose id nobody has been
     * given yet. A stored session's later commits in flight are not waited for (its tenant never
     * changes), or a foreign session being written would answer later than an unknown id.
     */
    tenantOf: async (sessionId: string): Promise<string | undefined> => {
      const tenant = this.dbs.tenants.get(sessionId) as string | undefined
      if (tenant !== undefined) return tenant
      await this.writer.settledFor(sessionId)
      return this.dbs.tenants.get(sessionId) as string | undefined
    },
    list: async (tenant: string, q: SessionQuery): Promise<Page<SessionSummary>> => {
      const after = decodeCursor(q.cursor)
      const limit = q.limit ?? 20
      const keys = q.status
        ? this.dbs.byStatus.getKeys({ start: [tenant, q.status, after ?? TOP], end: [tenant, q.status, ''], reverse: true })
        : this.dbs.byTenant.getKeys({ start: [tenant, after ?? TOP], end: [tenant, ''], reverse: true })
      const filtered = hasSessionFilter(q)
      const items: SessionSummary[] = []
      let scanned = 0
      let last: string | undefined
      for (const k of keys) {
        const id = k[k.length - 1] as string
        if (id === after) continue
        if (items.length === limit) return { items, next_cursor: encodeCursor(items.at(-1)!.session_id) }
        if (filtered && scanned++ === FILTER_SCAN_BUDGET) return { items, next_cursor: encodeCursor(last!) }
        last = id
        const h = this.dbs.heads.get(id) as Head
        const summary = toSummary({ ...h, session_id: id, config: this.dbs.configs.get(id) as SessionConfig })
        if (!filtered || matchesSession(summary, q)) items.push(summary)
      }
      return { items, next_cursor: null }
    },
    runningTurns: async (): Promise<string[]> => [...this.dbs.running.getKeys()] as string[],
    allIds: (): AsyncIterable<string> => {
      const keys = this.dbs.heads.getKeys()
      return (async function* () {
        for (const k of keys) yield k as string
      })()
    },
  }

  readonly projection: ProjectionState = {
    checkpoint: async (sid) => (this.dbs.checkpoints.get(sid) as number | undefined) ?? 0,
    projected: (sid, seq) => this.writer.checkpoint(sid, seq),
    pending: async () => [...this.dbs.pending.getKeys()] as string[],
    reset: async () => {
      await this.dbs.checkpoints.childTransaction(() => {
        for (const k of this.dbs.checkpoints.getKeys()) this.dbs.checkpoints.remove(k)
        for (const key of this.dbs.heads.getKeys()) this.dbs.pending.put(key as string, 1)
      })
      this.writer.forgetAll()
    },
  }

  commit(
    events: readonly EventEnvelope[],
    snapshot: SessionRecord,
    _fence?: number,
    outcomes?: readonly IdempotencyWrite[],
  ): Promise<void> {
    return this.writer.commit(events, snapshot, outcomes)
  }

  private load(sid: string): SessionRecord | undefined {
    const head = this.dbs.heads.get(sid) as Head | undefined
    if (!head) return undefined
    const messages: Message[] = []
    const seqs: number[] = []
    const turns: number[] = []
    for (const { value } of this.dbs.events.getRange({ start: [sid, head.messages_from], end: [sid, Infinity] })) {
      const part = rowMessages(value as LogRow)
      if (!part) continue
      if (part.i !== messages.length) throw new Error(`the stored history of ${sid} has a hole at message ${messages.length}`)
      for (let i = 0; i < part.m.length; i++) {
        messages.push(part.m[i]!)
        seqs.push(part.s[i]!)
        turns.push(part.t[i]!)
      }
    }
    const usage: TurnUsage[] = []
    for (const { value } of this.dbs.turnUsage.getRange({ start: [sid, 0], end: [sid, usageChunk(head.usage_tail[0]?.[0] ?? 1)] })) {
      for (const t of value as UsageTuple[]) usage.push(fromTuple(t))
    }
    const { message_count: _c, message_generation: generation, messages_from: _f, usage_tail: tail, ...rest } = head
    for (const t of tail) usage.push(fromTuple(t))
    return {
      session_id: sid,
      ...rest,
      config: this.dbs.configs.get(sid) as SessionConfig,
      notes: (this.dbs.notes.get(sid) as SessionNote[] | undefined) ?? [],
      messages,
      message_seqs: seqs,
      message_turns: turns,
      usage_by_turn: usage,
      history_generation: generation,
    }
  }

  async deleteSession(sessionId: string, tenant: string): Promise<void> {
    await this.writer.delete(sessionId, tenant)
    await this.idempotency.deletePrefix(`${tenant}\u0000${sessionId}\u0000`)
    // Both writes succeeded, so this flush settles (lmdb-js never settles one after a failed commit).
    if (this.durability === 'fsync') await this.env.flushed()
  }

  /** Drops idempotency records older than their TTL. */
  sweepIdempotency(): Promise<number> {
    return (this.idempotency as LmdbIdempotencyStore).sweep()
  }

  async close(): Promise<void> {
    this.health.close()
    await this.writer.idle()
    await this.env.close()
  }
}
