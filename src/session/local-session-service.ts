import { v7 as uuidv7 } from 'uuid'
import { BurrowError, storeUnavailable } from '../core/errors.js'
import type { EventEnvelope } from '../core/events.js'
import type { SessionNote } from '../core/session-record.js'
import type { CallContext, EventPage, EventSubscription, SessionService, SubscribeOptions } from '../core/session-service.js'
import type { IdempotencyStore, SessionRepository } from '../core/stores.js'
import { toCreated, toView } from '../core/views.js'
import type {
  AccessToken,
  Capabilities,
  CompactionOutcome,
  CreateSession,
  InterruptResult,
  MemoryAdd,
  MemoryAdded,
  MemoryItem,
  MemoryPageQuery,
  MemorySearchQuery,
  MemorySearchResult,
  Page,
  SessionCreated,
  SessionQuery,
  SessionSummary,
  SessionView,
  StartTurn,
  TokenRequest,
  TurnResult,
  UpdateSession,
  ForkSession,
} from '../core/wire.js'
import { closeOpenTurn } from './close-turn.js'
import { drainTurns } from './drain-turns.js'
import type { EventHub } from './event-hub.js'
import { EventReplay } from './event-replay.js'
import { Idempotency, idempotentRunner, type IdempotentRunner } from './idempotency.js'
import type { LiveSession } from './live-session.js'
import type { LiveSessions } from './live-sessions.js'
import { TenantMemory } from './memory-ops.js'
import { TenantFeed } from './tenant-feed.js'
import { notesAccess } from './session-notes.js'
import { SessionTurns } from './session-turns.js'
import { normalizeSessionQuery } from '../core/session-filter.js'
import { forkSession, updateSession } from './session-edits.js'
import { sessionConfig, type SessionConfigRules } from './turn-requests.js'

import type { LocalSessionServiceParts } from './service-parts.js'

export type { LocalSessionServiceParts, MemoryPort, ReplicaLink, ServiceCapabilities } from './service-parts.js'

const archived = (id: string) => new BurrowError('SESSION_ARCHIVED', `Session ${id} is archived.`)

/**
 * The SessionService of this process (the remote one is BurrowClient): tenancy, validation,
 * one turn at a time per session, idempotency, the agent loop and event fan-out, over the
 * parts it is given. Whether sessions outlive the process is the repository's business.
 */
export class LocalSessionService implements SessionService {
  private readonly repo: SessionRepository
  private readonly sessions: LiveSessions
  private readonly hub: EventHub
  /** The resumable tenant stream, where the store keeps a tenant journal (else the stream is live only). */
  private readonly tenantFeed: TenantFeed | undefined
  private readonly replay: EventReplay
  private readonly idempotent: IdempotentRunner
  /** Memory adds: their outcomes are kept where their entries are, when the memory store keeps them (else with the sessions'). */
  private readonly memoryIdempotent: IdempotentRunner
  private readonly configRules: SessionConfigRules
  private readonly turns: SessionTurns
  private shuttingDown = false

  constructor(private readonly parts: LocalSessionServiceParts) {
    this.repo = parts.repository
    this.sessions = parts.sessions
    this.hub = parts.hub
    this.replay = new EventReplay(parts.hub, parts.repository.events)
    const journal = parts.repository.journal
    this.tenantFeed = journal && new TenantFeed(parts.hub, journal, parts.repository.events, parts.hub.queueLimit)
    this.configRules = {
      capabilities: parts.capabilities,
      providers: parts.providers,
      builtinTools: parts.runner.builtinTools,
      compactionDefaults: parts.compactionDefaults,
      schemas: parts.runner.schemas,
    }
    const leases = parts.repository.leases
    const idempotency = (store: IdempotencyStore) =>
      new Idempotency(
        store,
        undefined,
        (err) => parts.logger.warn({ err }, 'an idempotent outcome could not be stored; a retry with its key would run again'),
        // A retry on another replica waits for the first attempt up to three lease durations (30 s by default).
        leases ? 3 * leases.durationMs : undefined,
      )
    this.idempotent = idempotentRunner(idempotency(parts.repository.idempotency))
    const memoryOutcomes = parts.memory?.store.idempotency
    this.memoryIdempotent = memoryOutcomes ? idempotentRunner(idempotency(memoryOutcomes)) : this.idempotent
    this.turns = new SessionTurns(parts, this.replay, this.idempotent, () => this.refuseWhenShuttingDown(), this.configRules)
    parts.memory?.indexer?.onIndexed((tenant, id, entries) => this.recordIndexed(tenant, id, entries))
  }

  // ---- process ------------------------------------------------------------------------

  authenticate(ctx: CallContext): string {
    return this.parts.auth.tenantFor(ctx.apiKey)
  }

  /**
   * The caller's tenant when its credential may read `session` (null: the tenant's data as a
   * whole — lists, the tenant stream, memory): `FORBIDDEN` for a token limited to another session.
   */
  private mayRead(ctx: CallContext, session: string | null): string {
    return this.parts.auth.authorize(ctx.apiKey, { write: false, session })
  }

  /** As {@link mayRead}, for a change: `FORBIDDEN` for a read-only token too. */
  private mayWrite(ctx: CallContext, session: string | null): string {
    return this.parts.auth.authorize(ctx.apiKey, { write: true, session })
  }

  async createToken(req: TokenRequest, ctx: CallContext): Promise<AccessToken> {
    // Minted first (it checks the caller's scope, and has no effect), so a session token learns nothing of other sessions.
    const t = this.parts.auth.mint(ctx.apiKey, req)
    // A session's token is checked against the session now: a typo gets 404, not a token good for nothing.
    if (req.session_id !== undefined) await this.sessions.current(this.parts.auth.tenantFor(ctx.apiKey), req.session_id)
    const iso = (s: number) => new Date(s * 1000).toISOString()
    return {
      token: t.token,
      token_type: 'Bearer',
      scope: t.scope,
      session_id: t.session,
      expires_at: iso(t.expiresAt),
      expires_in: Math.max(0, t.expiresAt - Math.floor(Date.now() / 1000)),
      refresh_until: iso(t.refreshUntil),
    }
  }

  capabilities(): Capabilities {
    const p = this.parts
    return {
      ...p.capabilities,
      version: p.version,
      auth: p.auth.enabled,
      default_model: p.providers.defaultModel(),
      providers: p.providers.status(),
    }
  }

  async getCapabilities(_ctx: CallContext): Promise<Capabilities> {
    return this.capabilities()
  }

  ready(): boolean {
    return this.readiness() === 'ready'
  }

  readiness(): 'ready' | 'shutting_down' | 'store_unavailable' {
    if (this.shuttingDown) return 'shutting_down'
    // Asking the memory store is also what lets it probe its way back to healthy (it probes when asked).
    const healthy = this.repo.writable() && (this.parts.memory?.store.healthy() ?? true) && (this.parts.replicas?.listening() ?? true)
    return healthy ? 'ready' : 'store_unavailable'
  }

  async shutdown(graceMs: number): Promise<void> {
    this.shuttingDown = true
    this.hub.closeAll('shutdown')
    await drainTurns(() => this.sessions.running(), graceMs)
  }

  // ---- sessions -----------------------------------------------------------------------

  async createSession(req: CreateSession, ctx: CallContext): Promise<SessionCreated> {
    const tenant = this.mayWrite(ctx, null)
    this.refuseWhenShuttingDown()
    return this.idempotent(ctx, tenant, 'session/create', null, req, async (receipt) => {
      const config = sessionConfig(tenant, req, this.configRules)
      const id = uuidv7()
      const event: EventEnvelope<'session_created'> = {
        seq: 1,
        session_id: id,
        turn: 0,
        type: 'session_created',
        at: new Date().toISOString(),
        data: { config },
      }
      let created: LiveSession
      try {
        created = await this.sessions.create(event, receipt ? (s) => receipt.seal({ ok: true, value: toCreated(s.record) }) : undefined)
      } catch (err) {
        throw storeUnavailable(err, 'the new session')
      }
      this.hub.publish(event)
      return toCreated(created.record)
    })
  }

  async read(id: string, ctx: CallContext): Promise<SessionView> {
    const tenant = this.mayRead(ctx, id)
    this.repo.requirePersistence()
    const s = await this.sessions.current(tenant, id)
    return toView(s.record, s.active)
  }

  async list(q: SessionQuery, ctx: CallContext): Promise<Page<SessionSummary>> {
    const tenant = this.mayRead(ctx, null)
    this.repo.requirePersistence()
    return this.repo.sessions.list(tenant, normalizeSessionQuery(q))
  }

  async forkSession(id: string, req: ForkSession, ctx: CallContext): Promise<SessionView> {
    const tenant = this.mayWrite(ctx, null) // it makes a session: a token of one session cannot
    this.repo.requirePersistence()
    this.refuseWhenShuttingDown()
    const source = await this.sessions.current(tenant, id)
    return this.idempotent(ctx, tenant, 'session/fork', id, req, (receipt) =>
      forkSession({ sessions: this.sessions, events: this.repo.events, hub: this.hub }, source, req.at_seq, receipt),
    )
  }

  async updateSession(id: string, req: UpdateSession, ctx: CallContext): Promise<SessionView> {
    const tenant = this.mayWrite(ctx, id)
    this.repo.requirePersistence()
    const s = await this.sessions.get(tenant, id)
    return this.idempotent(ctx, tenant, 'session/update', id, req, (receipt) =>
      this.sessions.exclusive(s, async () => {
        if (receipt && this.sessions.leased) await receipt.ensureFirst()
        return updateSession(this.sessions, s, req, this.configRules, receipt)
      }),
    )
  }

  async archive(id: string, ctx: CallContext): Promise<void> {
    const tenant = this.mayWrite(ctx, id)
    this.repo.requirePersistence()
    const s = await this.sessions.get(tenant, id)
    await this.idempotent(ctx, tenant, 'session/archive', id, {}, (receipt) =>
      this.sessions.exclusive(s, async () => {
        if (s.record.status === 'archived') return
        if (s.running) throw new BurrowError('SESSION_BUSY', `A turn is running on session ${id}; interrupt it before archiving.`)
        // A paused turn is closed first: an archived session never keeps a dangling tool call.
        await closeOpenTurn(s, 'SESSION_ARCHIVED', 'The session was archived while this turn waited for tool results.', 'archived')
        s.emit(s.record.turn_count, [{ type: 'session_archived', data: {} }], () => receipt?.seal({ ok: true, value: undefined }))
        await this.sessions.settle(s)
      }),
    )
  }

  async delete(id: string, ctx: CallContext): Promise<void> {
    const tenant = this.mayWrite(ctx, id)
    this.repo.requirePersistence()
    const s = await this.sessions.get(tenant, id)
    if (s.running) throw new BurrowError('SESSION_BUSY', `A turn is running on session ${id}; interrupt it before deleting.`)
    await this.sessions.exclusive(s, async () => {
      if (s.running) throw new BurrowError('SESSION_BUSY', `A turn is running on session ${id}; interrupt it before deleting.`)
      // Memories first: if the store then refuses the session's purge (a full disk), the session is still
      // there to delete again — the other way round its memories would outlive it, out of every API's reach.
      await this.parts.memory?.store.deleteSession(tenant, id)
      this.sessions.forget(id, { type: 'stream_closed', session_id: id, data: { reason: 'session_deleted' } })
      await this.repo.deleteSession(id, tenant)
      this.tenantFeed?.forgetSession(id)
      await this.sessions.deleted(id)
    })
  }

  // ---- turns --------------------------------------------------------------------------

  async startTurn(id: string, req: StartTurn, ctx: CallContext): Promise<TurnResult> {
    const tenant = this.mayWrite(ctx, id)
    return this.turns.turn(tenant, id, req, ctx, 'turn/start')
  }

  /** Continues a persisted session, also one whose last turn was cut off by a crash (SessionTurns.resume). */
  async resume(id: string, req: StartTurn, ctx: CallContext): Promise<TurnResult> {
    const tenant = this.mayWrite(ctx, id)
    this.repo.requirePersistence()
    return this.turns.resume(tenant, id, req, ctx)
  }

  async interrupt(id: string, ctx: CallContext): Promise<InterruptResult> {
    const tenant = this.mayWrite(ctx, id)
    const local = () => this.turns.interrupt(tenant, id)
    return this.parts.replicas ? this.parts.replicas.interrupt(tenant, id, local) : local()
  }

  async compact(id: string, ctx: CallContext): Promise<CompactionOutcome> {
    const tenant = this.mayWrite(ctx, id)
    return this.turns.compact(tenant, id, ctx)
  }

  // ---- events -------------------------------------------------------------------------

  async subscribe(id: string | null, opts: SubscribeOptions, ctx: CallContext): Promise<EventSubscription> {
    const tenant = this.mayRead(ctx, id)
    this.refuseWhenShuttingDown()
    if (id === null) {
      if (this.tenantFeed) {
        const sub = await this.tenantFeed.open(tenant, opts.after)
        if (this.shuttingDown) sub.closeWith({ type: 'stream_closed', session_id: null, data: { reason: 'shutdown' } })
        return sub
      }
      const sub = this.hub.subscribeTenant(tenant)
      if (opts.after !== undefined) {
        sub.control({
          type: 'stream_truncated',
          session_id: null,
          data: { requested_after: opts.after, first_seq: 0, reason: 'live_only' },
        })
      }
      return sub
    }
    const session = await this.sessions.current(tenant, id)
    const sub = await this.replay.subscribe(session.id, opts.after, session.record.last_seq, this.sessions.streamStart(session))
    // Shutdown began while the session loaded: the hub closed its streams already, so this one ends now, told why.
    if (this.shuttingDown) sub.closeWith({ type: 'stream_closed', session_id: session.id, data: { reason: 'shutdown' } })
    return sub
  }

  async listEvents(id: string, q: { after: number; limit: number }, ctx: CallContext): Promise<EventPage> {
    const tenant = this.mayRead(ctx, id)
    const session = await this.sessions.current(tenant, id)
    return this.replay.eventPage(session.id, q.after, q.limit, session.record.last_seq)
  }

  // ---- notes --------------------------------------------------------------------------

  async listNotes(id: string, ctx: CallContext): Promise<SessionNote[]> {
    const tenant = this.mayRead(ctx, id)
    const s = await this.sessions.current(tenant, id)
    return s.record.notes.map((n) => ({ ...n }))
  }

  async putNote(id: string, key: string, value: string, ctx: CallContext): Promise<SessionNote> {
    const tenant = this.mayWrite(ctx, id)
    const s = await this.sessions.get(tenant, id)
    if (s.record.status === 'archived') throw archived(id)
    return this.sessions.exclusive(s, async () => {
      if (s.record.status === 'archived') throw archived(id) // archived on another replica: known once revalidated
      await notesAccess(s, s.record.turn_count, 'client', { key: 'params/key', value: 'body/value' }).setNote(key, value)
      await this.sessions.settle(s)
      return { ...s.record.notes.find((n) => n.key === key)! }
    })
  }

  async deleteNote(id: string, key: string, ctx: CallContext): Promise<boolean> {
    const tenant = this.mayWrite(ctx, id)
    const s = await this.sessions.get(tenant, id)
    if (s.record.status === 'archived') throw archived(id)
    return this.sessions.exclusive(s, async () => {
      if (s.record.status === 'archived') throw archived(id)
      const deleted = await notesAccess(s, s.record.turn_count, 'client').deleteNote(key)
      await this.sessions.settle(s)
      return deleted
    })
  }

  // ---- memory -------------------------------------------------------------------------

  async searchMemory(q: MemorySearchQuery, ctx: CallContext): Promise<MemorySearchResult> {
    return this.memory(ctx, false, (m) => m.search(q, ctx.trace))
  }
  async listMemory(q: MemoryPageQuery, ctx: CallContext): Promise<Page<MemoryItem>> {
    return this.memory(ctx, false, (m) => m.list(q))
  }
  async getMemory(id: string, ctx: CallContext): Promise<MemoryItem> {
    return this.memory(ctx, false, (m) => m.get(id))
  }
  async deleteMemory(id: string, ctx: CallContext): Promise<void> {
    return this.memory(ctx, true, (m) => m.delete(id))
  }
  async addMemory(entries: MemoryAdd, ctx: CallContext): Promise<MemoryAdded> {
    return this.memory(ctx, true, (m, tenant) => this.memoryIdempotent(ctx, tenant, 'memory/add', null, entries, (r) => m.add(entries, r)))
  }

  /** The caller's tenant's memory operations (`MEMORY_STORE_DISABLED` without the capability). */
  private async memory<T>(ctx: CallContext, write: boolean, run: (m: TenantMemory, tenant: string) => Promise<T>): Promise<T> {
    const tenant = write ? this.mayWrite(ctx, null) : this.mayRead(ctx, null)
    const memory = this.parts.memory
    if (!memory || !this.parts.capabilities.memory_store) throw new BurrowError('MEMORY_STORE_DISABLED')
    return run(new TenantMemory(memory.store, tenant, (id) => this.sessions.get(tenant, id), memory.tracer), tenant)
  }

  /** Records that memory indexed `entries` passages of a session (if it still exists). */
  private async recordIndexed(tenant: string, sessionId: string, entries: number): Promise<void> {
    const s = await Promise.resolve(this.sessions.get(tenant, sessionId)).catch(() => undefined)
    if (!s) return // deleted meanwhile
    // With leases, held by the turn that compacted (when it still runs here) or taken for this write.
    await this.sessions
      .exclusive(s, async () => {
        s.emit(s.record.turn_count, [{ type: 'memory_indexed', data: { entries } }])
      })
      .catch((err: unknown) => this.parts.logger.warn({ err, session_id: sessionId }, 'memory_indexed was not recorded'))
  }

  // ---- shared -------------------------------------------------------------------------

  private refuseWhenShuttingDown(): void {
    if (this.shuttingDown) throw new BurrowError('SHUTTING_DOWN')
  }
}
