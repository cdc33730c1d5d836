import type { EventEnvelope } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { IdempotencyStore, IdempotencyWrite, ProjectionState, SessionRepository } from '../core/stores.js'
import type { Page, SessionQuery, SessionSummary } from '../core/wire.js'
import { FILTER_SCAN_BUDGET, hasSessionFilter, matchesSession } from '../core/session-filter.js'
import { decodeCursor, encodeCursor } from './cursor.js'
import { MemoryIdempotencyStore } from './memory-idempotency-store.js'
import { toSummary } from '../core/views.js'

/**
 * The reference SessionRepository, in process memory: what the conformance suites hold
 * every durable backend to. Values are deep-copied on the way in and out, as a real store's are.
 */
export class MemorySessionRepository implements SessionRepository {
  private readonly log = new Map<string, EventEnvelope[]>()
  private readonly snapshots = new Map<string, SessionRecord>()
  private readonly checkpoints = new Map<string, number>()
  private readonly dirty = new Map<string, number>()
  readonly idempotency: IdempotencyStore

  constructor(idempotencyTtlMs = 24 * 3600 * 1000) {
    this.idempotency = new MemoryIdempotencyStore(idempotencyTtlMs)
  }

  readonly events = {
    readAfter: async (sessionId: string, after: number, upTo = Infinity, limit = Infinity): Promise<EventEnvelope[]> => {
      const out: EventEnvelope[] = []
      for (const e of this.log.get(sessionId) ?? []) {
        if (e.seq > after && e.seq <= upTo) out.push(structuredClone(e))
        if (out.length >= limit) break
      }
      return out
    },
    lastSeq: async (sessionId: string): Promise<number> => this.log.get(sessionId)?.at(-1)?.seq ?? 0,
  }

  readonly sessions = {
    tenantOf: async (sessionId: string): Promise<string | undefined> => this.snapshots.get(sessionId)?.config.tenant,
    get: async (sessionId: string): Promise<SessionRecord | undefined> => {
      const r = this.snapshots.get(sessionId)
      return r ? structuredClone(r) : undefined
    },
    list: async (tenant: string, q: SessionQuery): Promise<Page<SessionSummary>> => {
      const after = decodeCursor(q.cursor)
      const limit = q.limit ?? 20
      const candidates = [...this.snapshots.values()]
        .filter((r) => r.config.tenant === tenant && (!q.status || r.status === q.status) && (after === undefined || r.session_id < after))
        .map(toSummary)
        .sort((a, b) => (a.session_id < b.session_id ? 1 : -1))
      // As the durable stores: a filtered page looks at FILTER_SCAN_BUDGET sessions at most, then hands on a cursor.
      const filtered = hasSessionFilter(q)
      const items: SessionSummary[] = []
      for (const [scanned, s] of candidates.entries()) {
        if (items.length === limit) return { items, next_cursor: encodeCursor(items.at(-1)!.session_id) }
        if (filtered && scanned === FILTER_SCAN_BUDGET) return { items, next_cursor: encodeCursor(candidates[scanned - 1]!.session_id) }
        if (matchesSession(s, q)) items.push(s)
      }
      return { items, next_cursor: null }
    },
    runningTurns: async (): Promise<string[]> =>
      [...this.snapshots.values()].filter((r) => r.open_turn?.state === 'running').map((r) => r.session_id),
    allIds: (): AsyncIterable<string> => {
      const ids = [...this.snapshots.keys()]
      return (async function* () {
        yield* ids
      })()
    },
  }

  readonly projection: ProjectionState = {
    checkpoint: async (sid) => this.checkpoints.get(sid) ?? 0,
    projected: async (sid, seq) => {
      if (!this.snapshots.has(sid)) return
      this.checkpoints.set(sid, seq)
      if ((this.dirty.get(sid) ?? 0) <= seq) this.dirty.delete(sid)
    },
    pending: async () => [...this.dirty.keys()],
    reset: async () => {
      this.checkpoints.clear()
      for (const r of this.snapshots.values()) this.dirty.set(r.session_id, r.last_seq)
    },
  }

  async commit(
    events: readonly EventEnvelope[],
    snapshot: SessionRecord,
    _fence?: number,
    outcomes: readonly IdempotencyWrite[] = [],
  ): Promise<void> {
    const sid = snapshot.session_id
    const log = this.log.get(sid) ?? []
    let expected = (log.at(-1)?.seq ?? 0) + 1
    for (const e of events) {
      if (e.session_id !== sid || e.seq !== expected)
        throw new Error(`commit out of order for ${sid}: expected seq ${expected}, got ${e.seq}`)
      expected++
    }
    if (snapshot.last_seq !== expected - 1) throw new Error(`snapshot of ${sid} is at seq ${snapshot.last_seq}, log at ${expected - 1}`)
    log.push(...events.map((e) => structuredClone(e)))
    this.log.set(sid, log)
    this.snapshots.set(sid, structuredClone(snapshot))
    this.dirty.set(sid, snapshot.last_seq)
    for (const o of outcomes) await this.idempotency.put(o.key, o.record)
  }

  async deleteSession(sessionId: string, tenant: string): Promise<void> {
    this.log.delete(sessionId)
    this.snapshots.delete(sessionId)
    this.checkpoints.delete(sessionId)
    this.dirty.delete(sessionId)
    await this.idempotency.deletePrefix(`${tenant}\u0000${sessionId}\u0000`)
  }

  /** Process memory never refuses a write. */
  writable(): boolean {
    return true
  }

  /** The reference holds sessions as a durable store does (for the life of the object). */
  requirePersistence(): void {}

  async close(): Promise<void> {}
}
