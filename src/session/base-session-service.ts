import { v7 as uuidv7 } from 'uuid'
import { BurrowError, storeUnavailable, toBurrowError } from '../core/errors.js'
import type { EventEnvelope } from '../core/events.js'
import { isSessionId } from '../core/ids.js'
import type { ProviderRegistry } from '../core/llm.js'
import type { Logger } from '../core/logger.js'
import type { EffectiveCompaction, SessionNote, SessionRecord } from '../core/session-record.js'
import type { MemoryStore } from '../core/memory-store.js'
import type { CallContext, EventPage, EventSubscription, SessionService, SubscribeOptions } from '../core/session-service.js'
import type { IdempotencyRecord, IdempotencyStore } from '../core/stores.js'
import type { Telemetry } from '../core/telemetry.js'
import type { BuiltinTool } from '../core/tools.js'
import type {
  Capabilities, CompactionOutcome, CreateSession, InterruptResult, MemoryAdd, MemoryAdded, MemoryItem, MemoryPageQuery,
  MemorySearchQuery, MemorySearchResult, Page, SessionCreated, SessionQuery, SessionSummary, SessionView, StartTurn, TurnResult,
} from '../core/wire.js'
import type { Authenticator } from './authenticator.js'
import { Cancellation } from './cancellation.js'
import { drainTurns } from './drain-turns.js'
import { EventHub } from './event-hub.js'
import { Idempotency, idempotencyKey } from './idempotency.js'
import { LiveSession, type CommitFn } from './live-session.js'
import { applyEvent } from './session-reducer.js'
import type { CompactionController } from './compaction-controller.js'
import { closeAbandonedTurn, closeOpenTurn, notesAccess, TurnRunner, type TurnStart } from './turn-runner.js'
import { toCreated } from '../core/views.js'
import { sessionConfig, turnStart } from './turn-requests.js'
import { TenantMemory } from './memory-ops.js'

export interface ServiceCapabilities { session_store: boolean; memory_store: boolean; session_compaction: boolean }

export interface ServiceLimits {
  maxSteps: number
  defaultMaxTokens: number
  /** Stored events kept per live session for SSE replay without a store. */
  eventBuffer: number
  /** Frames a subscriber may fall behind before it is dropped. */
  subscriberQueue: number
  /** Live sessions kept in memory; the least recently used idle ones are evicted. */
  maxLiveSessions: number
}

export interface SessionServiceDeps {
  providers: ProviderRegistry
  auth: Authenticator
  idempotency: IdempotencyStore
  telemetry: Telemetry
  logger: Logger
  version: string
  capabilities: ServiceCapabilities
  limits: ServiceLimits
  compactionDefaults: EffectiveCompaction
  builtinTools?: readonly BuiltinTool[]
  /** Present when the `session-compaction` capability is on. */
  compaction?: CompactionController
  /** Present when the `memory-store` capability is on. */
  memory?: MemoryStore
  memoryGuide?: string
}

/**
 * Everything sessions share whatever the storage: tenancy, validation, the live
 * session table, one-turn-at-a-time, idempotency, the agent loop and event fan-out.
 * Subclasses decide how sessions are found and how events are committed.
 */
export abstract class BaseSessionService implements SessionService {
  protected readonly live = new Map<string, LiveSession>()
  protected readonly hub: EventHub
  protected readonly runner: TurnRunner
  private readonly idem: Idempotency
  private shuttingDown = false

  constructor(protected readonly deps: SessionServiceDeps) {
    this.hub = new EventHub({ bufferSize: deps.limits.eventBuffer, queueLimit: deps.limits.subscriberQueue })
    this.idem = new Idempotency(deps.idempotency, undefined,
      (err) => deps.logger.warn({ err }, 'an idempotent outcome could not be stored; a retry with its key would run again'))
    this.runner = new TurnRunner({
      providers: deps.providers, builtinTools: deps.builtinTools ?? [], beforeLlmCall: deps.compaction?.beforeLlmCall, memoryGuide: deps.memoryGuide,
      maxSteps: deps.limits.maxSteps, defaultMaxTokens: deps.limits.defaultMaxTokens,
      telemetry: deps.telemetry, logger: deps.logger,
    })
  }

  // ---- storage seams ------------------------------------------------------------------

  /** Persists committed events (and the record they produced). */
  protected abstract commitFn(): CommitFn
  /** Finds a session not live in this process (undefined when it does not exist, or belongs to another tenant). */
  protected abstract loadRecord(id: string, tenant: string): Promise<SessionRecord | undefined>
  /** Stored events of a session in `(after, upTo]` (at most `limit`), for replays. */
  protected abstract storedEvents(id: string, after: number, upTo: number, limit?: number): Promise<EventEnvelope[]>

  abstract read(id: string, ctx: CallContext): Promise<SessionView>
  abstract list(q: SessionQuery, ctx: CallContext): Promise<Page<SessionSummary>>
  abstract archive(id: string, ctx: CallContext): Promise<void>
  abstract delete(id: string, ctx: CallContext): Promise<void>
  abstract resume(id: string, req: StartTurn, ctx: CallContext): Promise<TurnResult>

  // ---- operations ---------------------------------------------------------------------

  authenticate(ctx: CallContext): string {
    return this.deps.auth.tenantFor(ctx.apiKey)
  }

  capabilities(): Capabilities {
    return {
      ...this.deps.capabilities, version: this.deps.version, auth: this.deps.auth.enabled,
      default_model: this.deps.providers.defaultModel(), providers: this.deps.providers.status(),
    }
  }

  async getCapabilities(_ctx: CallContext): Promise<Capabilities> { return this.capabilities() }

  ready(): boolean { return this.readiness() === 'ready' }

  readiness(): 'ready' | 'shutting_down' | 'store_unavailable' {
    if (this.shuttingDown) return 'shutting_down'
    // Asking the memory store is also what lets it probe its way back to healthy (it probes when asked).
    return this.storeWritable() && (this.deps.memory?.healthy() ?? true) ? 'ready' : 'store_unavailable'
  }

  /** Whether the store takes writes now (always, without one). */
  protected storeWritable(): boolean { return true }
  async createSession(req: CreateSession, ctx: CallContext): Promise<SessionCreated> {
    const tenant = this.authenticate(ctx)
    this.refuseWhenShuttingDown()
    return this.idempotent(ctx, tenant, 'session/create', null, req, async () => {
      const config = sessionConfig(tenant, req, this.deps)
      const id = uuidv7()
      const event: EventEnvelope<'session_created'> = {
        seq: 1, session_id: id, turn: 0, type: 'session_created', at: new Date().toISOString(), data: { config },
      }
      const created = applyEvent(undefined, event)
      try {
        await this.commitFn()([event], created)
      } catch (err) {
        throw storeUnavailable(err, 'the new session')
      }
      this.adopt(created)
      this.hub.publish(event)
      return toCreated(created)
    })
  }

  async startTurn(id: string, req: StartTurn, ctx: CallContext): Promise<TurnResult> {
    const tenant = this.authenticate(ctx)
    return this.turn(tenant, id, req, ctx, 'turn/start')
  }

  protected async turn(tenant: string, id: string, req: StartTurn, ctx: CallContext, op: string): Promise<TurnResult> {
    this.refuseWhenShuttingDown()
    const session = await this.session(tenant, id)
    if (await closeAbandonedTurn(session)) await this.settle(session)
    return this.idempotent(ctx, tenant, op, id, req, async () => {
      const start = turnStart(session, req, this.deps.providers, op === 'session/resume')
      return this.runTurn(session, start, ctx)
    }, (outcome) => this.replayOutcome(session.id, outcome, ctx))
  }

  async interrupt(id: string, ctx: CallContext): Promise<InterruptResult> {
    const tenant = this.authenticate(ctx)
    const session = await this.session(tenant, id)
    const running = session.running
    if (running) {
      running.controller.abort(new BurrowError('INTERRUPTED', 'The turn was interrupted by a client.'))
      await running.done.catch(() => undefined)
      return { session_id: id, interrupted: true, turn: running.turn }
    }
    const open = session.record.open_turn
    if (open) {
      await closeOpenTurn(session, 'INTERRUPTED', 'The turn was interrupted by a client.')
      await this.settle(session)
      return { session_id: id, interrupted: true, turn: open.turn }
    }
    return { session_id: id, interrupted: false, turn: null }
  }

  async compact(id: string, ctx: CallContext): Promise<CompactionOutcome> {
    const tenant = this.authenticate(ctx)
    const controller = this.deps.compaction
    if (!controller || !this.deps.capabilities.session_compaction) throw new BurrowError('SESSION_COMPACTION_DISABLED')
    this.refuseWhenShuttingDown()
    const session = await this.session(tenant, id)
    return this.idempotent(ctx, tenant, 'session/compact', id, {}, async () => {
      if (session.record.status === 'archived') throw new BurrowError('SESSION_ARCHIVED', `Session ${id} is archived.`)
      if (session.running || session.record.open_turn) throw new BurrowError('SESSION_BUSY', `A turn is running or waiting on session ${id}; compact it when the turn has ended.`)
      const cancel = new Cancellation()
      const cfg = session.record.config.compaction ?? this.deps.compactionDefaults
      const done = controller.run(session, session.record.turn_count, cfg, cancel, true)
      session.running = { turn: session.record.turn_count, controller: cancel, done }
      try {
        const outcome = await done
        await this.settle(session)
        return outcome
      } finally {
        session.running = null
      }
    })
  }

  async subscribe(id: string | null, opts: SubscribeOptions, ctx: CallContext): Promise<EventSubscription> {
    const tenant = this.authenticate(ctx)
    this.refuseWhenShuttingDown()
    if (id === null) {
      const sub = this.hub.subscribeTenant(tenant)
      if (opts.after !== undefined) {
        sub.control({ type: 'stream_truncated', session_id: null, data: { requested_after: opts.after, first_seq: 0, reason: 'live_only' } })
      }
      return sub
    }
    const session = await this.session(tenant, id)
    let sub: Awaited<ReturnType<EventHub['subscribeSession']>>
    try {
      sub = await this.hub.subscribeSession(session.id, opts.after, session.record.last_seq, (from, limit) => this.replayPage(session.id, from, limit))
    } catch (err) { throw toBurrowError(err) }
    // Shutdown began while the session loaded: the hub closed its streams already, so this one ends now, told why.
    if (this.shuttingDown) sub.closeWith({ type: 'stream_closed', session_id: session.id, data: { reason: 'shutdown' } })
    return sub
  }

  async listEvents(id: string, q: { after: number; limit: number }, ctx: CallContext): Promise<EventPage> {
    const tenant = this.authenticate(ctx)
    const session = await this.session(tenant, id)
    const events = await this.replayPage(session.id, q.after, q.limit)
    const last = session.record.last_seq
    return { events, truncated: q.after < last && (events[0]?.seq ?? last + 1) > q.after + 1, last_seq: last }
  }

  /** Stored events after `from`: from the in-memory buffer when it reaches back that far, else the log. */
  private async replayPage(id: string, from: number, limit: number): Promise<EventEnvelope[]> {
    const start = this.hub.bufferStart(id)
    if (start !== null && start <= from + 1) return this.hub.buffered(id, from).slice(0, limit)
    const stored = await this.storedEvents(id, from, Infinity, limit)
    if (stored.length > 0) return stored
    return start === null ? [] : this.hub.buffered(id, from).slice(0, limit) // no log (ephemeral): what the buffer has
  }

  async searchMemory(q: MemorySearchQuery, ctx: CallContext): Promise<MemorySearchResult> { return this.memory(ctx, (m) => m.search(q)) }
  async listMemory(q: MemoryPageQuery, ctx: CallContext): Promise<Page<MemoryItem>> { return this.memory(ctx, (m) => m.list(q)) }
  async getMemory(id: string, ctx: CallContext): Promise<MemoryItem> { return this.memory(ctx, (m) => m.get(id)) }
  async deleteMemory(id: string, ctx: CallContext): Promise<void> { return this.memory(ctx, (m) => m.delete(id)) }
  async addMemory(entries: MemoryAdd, ctx: CallContext): Promise<MemoryAdded> {
    return this.memory(ctx, (m, tenant) => this.idempotent(ctx, tenant, 'memory/add', null, entries, () => m.add(entries)))
  }

  /** The caller's tenant's memory operations (`MEMORY_STORE_DISABLED` without the capability). */
  private async memory<T>(ctx: CallContext, run: (m: TenantMemory, tenant: string) => Promise<T>): Promise<T> {
    const tenant = this.authenticate(ctx)
    if (!this.deps.memory || !this.deps.capabilities.memory_store) throw new BurrowError('MEMORY_STORE_DISABLED')
    return run(new TenantMemory(this.deps.memory, tenant, (id) => this.session(tenant, id)), tenant)
  }

  async listNotes(id: string, ctx: CallContext): Promise<SessionNote[]> {
    const tenant = this.authenticate(ctx)
    const s = await this.session(tenant, id)
    return s.record.notes.map((n) => ({ ...n }))
  }

  async putNote(id: string, key: string, value: string, ctx: CallContext): Promise<SessionNote> {
    const tenant = this.authenticate(ctx)
    const s = await this.session(tenant, id)
    if (s.record.status === 'archived') throw new BurrowError('SESSION_ARCHIVED', `Session ${id} is archived.`)
    await notesAccess(s, s.record.turn_count, 'client', { key: 'params/key', value: 'body/value' }).setNote(key, value)
    await this.settle(s)
    return { ...s.record.notes.find((n) => n.key === key)! }
  }

  async deleteNote(id: string, key: string, ctx: CallContext): Promise<boolean> {
    const tenant = this.authenticate(ctx)
    const s = await this.session(tenant, id)
    if (s.record.status === 'archived') throw new BurrowError('SESSION_ARCHIVED', `Session ${id} is archived.`)
    const deleted = await notesAccess(s, s.record.turn_count, 'client').deleteNote(key)
    await this.settle(s)
    return deleted
  }

  /** Records that memory indexed `entries` passages of a session (if it still exists). */
  async recordIndexed(tenant: string, sessionId: string, entries: number): Promise<void> {
    const s = await Promise.resolve(this.session(tenant, sessionId)).catch(() => undefined)
    if (!s) return // deleted meanwhile
    s.emit(s.record.turn_count, [{ type: 'memory_indexed', data: { entries } }])
  }

  async shutdown(graceMs: number): Promise<void> {
    this.shuttingDown = true
    this.hub.closeAll('shutdown')
    await drainTurns(() => [...this.live.values()].flatMap((s) => (s.running ? [s.running] : [])), graceMs)
  }

  // ---- shared machinery -------------------------------------------------------------

  /** The caller's live session, loading it if needed; another tenant's is not found. */
  protected session(tenant: string, id: string): LiveSession | Promise<LiveSession> {
    const s = this.live.get(id)
    // The common case — a live, healthy session of this tenant — answers without a promise.
    if (s && s.tenant === tenant && !s.broken) { s.lastActive = Date.now(); return s }
    return this.loadSession(tenant, id)
  }

  private async loadSession(tenant: string, id: string): Promise<LiveSession> {
    if (!isSessionId(id)) throw new BurrowError('SESSION_NOT_FOUND', `Session ${String(id).slice(0, 64)} not found.`)
    let s = this.live.get(id)
    if (!s) {
      const record = await this.loadRecord(id, tenant)
      if (record) s = this.live.get(id) ?? this.adopt(record)
    }
    if (!s || s.tenant !== tenant) throw new BurrowError('SESSION_NOT_FOUND', `Session ${id} not found.`)
    if (s.broken) {
      // Loaded again from the store, which may hold what this process never saw (its buffered events
      // would have a gap): the channel goes too, and its subscribers end (they resume by Last-Event-ID).
      this.forget(id)
      return this.session(tenant, id)
    }
    s.lastActive = Date.now()
    return s
  }

  /** Makes a record live in this process. */
  protected adopt(record: SessionRecord): LiveSession {
    const id = record.session_id
    const s = new LiveSession(record, this.commitFn(), (e) => this.hub.publish(e), () => this.hub.hasListeners(id))
    this.live.set(record.session_id, s)
    this.hub.open(record.session_id, record.config.tenant)
    this.evictIdle()
    return s
  }

  protected forget(id: string): void {
    this.live.delete(id)
    this.hub.drop(id)
  }

  private evictIdle(): void {
    if (this.live.size <= this.deps.limits.maxLiveSessions) return
    const idle = [...this.live.values()]
      .filter((s) => !s.running && !s.record.open_turn && this.hub.subscriberCount(s.id) === 0)
      .sort((a, b) => a.lastActive - b.lastActive)
    for (const s of idle) {
      if (this.live.size <= this.deps.limits.maxLiveSessions) break
      this.deps.logger.debug({ session_id: s.id }, 'evicting idle session from memory')
      this.forget(s.id)
    }
  }

  private async runTurn(session: LiveSession, start: TurnStart, ctx: CallContext): Promise<TurnResult> {
    const controller = new Cancellation()
    const turn = start.kind === 'tool_results' ? session.record.open_turn!.turn : session.record.turn_count + 1
    const t0 = performance.now()
    session.callSink = ctx.onEvent ?? null
    const done = this.runner.run(session, start, controller)
    session.running = { turn, controller, done }
    try {
      const result = await done
      await this.settle(session) // acknowledged only once durable
      this.deps.telemetry.turnEnded(result.status, (performance.now() - t0) / 1000)
      return result
    } catch (err) {
      this.deps.telemetry.turnEnded('failed', (performance.now() - t0) / 1000)
      await this.settle(session)
      throw err
    } finally {
      session.running = null
      session.callSink = null
    }
  }

  private async replayOutcome(id: string, outcome: IdempotencyRecord['outcome'], ctx: CallContext): Promise<void> {
    if (!ctx.onEvent) return
    const data = (outcome.ok ? outcome.value : outcome.data) as { first_seq?: number; last_seq?: number } | undefined
    if (typeof data?.first_seq !== 'number' || typeof data.last_seq !== 'number') return
    const events = this.hub.bufferStart(id) !== null && this.hub.bufferStart(id)! <= data.first_seq
      ? this.hub.buffered(id, data.first_seq - 1, data.last_seq)
      : await this.storedEvents(id, data.first_seq - 1, data.last_seq)
    for (const e of events) ctx.onEvent(e)
  }

  protected idempotent<T>(ctx: CallContext, tenant: string, op: string, sessionId: string | null, body: unknown, run: () => Promise<T>,
    onReplay?: (o: IdempotencyRecord['outcome']) => Promise<void>): Promise<T> {
    if (!ctx.idempotencyKey) return run()
    return this.idem.run({ key: idempotencyKey(tenant, sessionId, ctx.idempotencyKey), op, body, run, onReplay })
  }

  /** Waits until the session's committed events are durable (an acknowledgement); STORE_UNAVAILABLE if the store could not write them, INTERNAL for a conflict. */
  protected async settle(session: LiveSession): Promise<void> {
    try {
      await session.settled()
    } catch (err) {
      const e = toBurrowError(err)
      if (e.code === 'STORE_UNAVAILABLE') this.deps.logger.warn({ err: e, session_id: session.id }, 'events could not be made durable')
      else this.deps.logger.error({ err: e.cause ?? err, session_id: session.id }, 'events could not be stored')
      throw e
    }
  }

  protected refuseWhenShuttingDown(): void {
    if (this.shuttingDown) throw new BurrowError('SHUTTING_DOWN')
  }
}
