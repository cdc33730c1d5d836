import { BurrowError, invalidRequest } from '../core/errors.js'
import type { EventEnvelope } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { CallContext } from '../core/session-service.js'
import type { SessionRepository } from '../core/stores.js'
import { toView } from '../core/views.js'
import type { Page, SessionQuery, SessionSummary, SessionView, StartTurn, TurnResult } from '../core/wire.js'
import { BaseSessionService, type SessionServiceDeps } from './base-session-service.js'
import type { CommitFn } from './live-session.js'
import { closeOpenTurn } from './turn-runner.js'

export interface PersistentDeps extends Omit<SessionServiceDeps, 'idempotency'> {
  repository: SessionRepository
  /** Told after every commit, with the events it stored (the projector). */
  onCommit?: (sessionId: string, events: readonly EventEnvelope[]) => void
  /** Told when a session is deleted (the projector removes its files). */
  onDelete?: (sessionId: string) => Promise<void>
}

/**
 * Sessions on a durable SessionRepository: every event is committed (with the
 * snapshot it produced) before anyone sees it or a turn is acknowledged; sessions load
 * lazily; a turn left running by a process that died is closed at start-up.
 */
export class PersistentSessionService extends BaseSessionService {
  private readonly repo: SessionRepository
  private readonly commit: CommitFn

  constructor(private readonly pdeps: PersistentDeps) {
    super({ ...pdeps, idempotency: pdeps.repository.idempotency })
    this.repo = pdeps.repository
    const notify = pdeps.onCommit
    this.commit = notify
      ? async (events, record) => { await this.repo.commit(events, record); notify(record.session_id, events) }
      : (events, record) => this.repo.commit(events, record)
  }

  protected commitFn(): CommitFn { return this.commit }
  protected override storeWritable(): boolean { return this.repo.writable() }
  /** The tenant is checked before the record is read, so another tenant's session costs what an unknown id costs. */
  protected async loadRecord(id: string, tenant: string): Promise<SessionRecord | undefined> {
    if (await this.repo.sessions.tenantOf(id) !== tenant) return undefined
    return this.repo.sessions.get(id)
  }
  protected storedEvents(id: string, after: number, upTo: number, limit?: number): Promise<EventEnvelope[]> { return this.repo.events.readAfter(id, after, upTo, limit) }

  /**
   * Closes every turn a previous process left running: synthetic results for its open
   * tool calls, then `turn_failed` with `reason: process_restarted`. Returns how many.
   */
  async recover(): Promise<number> {
    const ids = await this.repo.sessions.runningTurns()
    let n = 0
    for (const id of ids) {
      const record = await this.repo.sessions.get(id)
      if (!record?.open_turn) continue
      const turn = record.open_turn.turn
      const s = this.adopt(record)
      await closeOpenTurn(s, 'INTERRUPTED', 'The process stopped while this turn was running.', 'process_restarted')
      await this.settle(s)
      this.deps.logger.warn({ session_id: id, turn }, 'closed a turn left running by a previous process')
      n++
    }
    return n
  }

  /** A session's record if it is live in this process (for the projector), without loading it. */
  liveRecord(id: string): SessionRecord | undefined {
    const s = this.live.get(id)
    return s && !s.broken ? s.record : undefined
  }

  async read(id: string, ctx: CallContext): Promise<SessionView> {
    const tenant = this.authenticate(ctx)
    const s = await this.session(tenant, id)
    return toView(s.record, s.running !== null)
  }

  async list(q: SessionQuery, ctx: CallContext): Promise<Page<SessionSummary>> {
    const tenant = this.authenticate(ctx)
    return this.repo.sessions.list(tenant, q)
  }

  async archive(id: string, ctx: CallContext): Promise<void> {
    const tenant = this.authenticate(ctx)
    const s = await this.session(tenant, id)
    await this.idempotent(ctx, tenant, 'session/archive', id, {}, async () => {
      if (s.record.status === 'archived') return
      if (s.running) throw new BurrowError('SESSION_BUSY', `A turn is running on session ${id}; interrupt it before archiving.`)
      // A paused turn is closed first: an archived session never keeps a dangling tool call.
      await closeOpenTurn(s, 'SESSION_ARCHIVED', 'The session was archived while this turn waited for tool results.', 'archived')
      s.emit(s.record.turn_count, [{ type: 'session_archived', data: {} }])
      await this.settle(s)
    })
  }

  async delete(id: string, ctx: CallContext): Promise<void> {
    const tenant = this.authenticate(ctx)
    const s = await this.session(tenant, id)
    if (s.running) throw new BurrowError('SESSION_BUSY', `A turn is running on session ${id}; interrupt it before deleting.`)
    // Memories first: if the store then refuses the session's purge (a full disk), the session is still
    // there to delete again — the other way round its memories would outlive it, out of every API's reach.
    await this.deps.memory?.deleteSession(tenant, id)
    this.live.delete(id)
    this.hub.drop(id, { type: 'stream_closed', session_id: id, data: { reason: 'session_deleted' } })
    await this.repo.deleteSession(id, tenant)
    await this.pdeps.onDelete?.(id)
  }

  /**
   * Continues a persisted session (loading it if this process has not), also one
   * whose last turn was cut off by a crash. With neither `input` nor `tool_results`,
   * the model is asked to answer the history as it stands (it must end with the user).
   */
  async resume(id: string, req: StartTurn, ctx: CallContext): Promise<TurnResult> {
    const tenant = this.authenticate(ctx)
    if (req.input === undefined && req.tool_results === undefined) {
      const s = await this.session(tenant, id)
      const last = s.record.messages[s.record.messages.length - 1]
      if (!last || last.role !== 'user') throw invalidRequest('body', "needs 'input' or 'tool_results': the history does not end with a user message to answer")
    }
    return this.turn(tenant, id, req, ctx, 'session/resume')
  }
}
