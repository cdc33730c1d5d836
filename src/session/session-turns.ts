import { BurrowError, invalidRequest } from '../core/errors.js'
import type { CallContext } from '../core/session-service.js'
import type { IdempotencyRecord } from '../core/stores.js'
import type { CompactionOutcome, InterruptResult, OnBusy, StartTurn, TurnResult } from '../core/wire.js'
import { closeAbandonedTurn, closeOpenTurn } from './close-turn.js'
import type { IdempotentRunner, Receipt } from './idempotency.js'
import type { EventReplay } from './event-replay.js'
import type { LiveSession } from './live-session.js'
import type { LocalSessionServiceParts } from './service-parts.js'
import { Turn, type TurnStart } from './turn.js'
import { turnStart, type TurnRules } from './turn-requests.js'
import { admitted, SUPERSEDED, type Admitted, type AdmissionDeps } from './turn-admission.js'

/**
 * The work that runs on a session — turns, resumes, interrupts, manual compactions — for
 * LocalSessionService, which has already authenticated the caller: one at a time per session,
 * acknowledged only once durable.
 */
export class SessionTurns {
  constructor(
    private readonly parts: LocalSessionServiceParts,
    private readonly replay: EventReplay,
    private readonly idempotent: IdempotentRunner,
    private readonly refuseWhenShuttingDown: () => void,
    private readonly rules: TurnRules,
  ) {
    this.admission = {
      sessions: parts.sessions,
      replicas: parts.replicas,
      interruptHere: (tenant, id) => this.interrupt(tenant, id),
      refuseWhenShuttingDown,
    }
  }

  private readonly admission: AdmissionDeps

  /**
   * Continues a persisted session (loading it if this process has not), also one
   * whose last turn was cut off by a crash. With neither `input` nor `tool_results`,
   * the model is asked to answer the history as it stands (it must end with the user).
   */
  async resume(tenant: string, id: string, req: StartTurn, ctx: CallContext): Promise<TurnResult> {
    if (req.input === undefined && req.tool_results === undefined) {
      const s = await this.parts.sessions.current(tenant, id)
      const last = s.record.messages[s.record.messages.length - 1]
      if (!last || last.role !== 'user')
        throw invalidRequest('body', "needs 'input' or 'tool_results': the history does not end with a user message to answer")
    }
    return this.turn(tenant, id, req, ctx, 'session/resume')
  }

  async interrupt(tenant: string, id: string): Promise<InterruptResult> {
    const sessions = this.parts.sessions
    const session = await sessions.get(tenant, id)
    const running = session.running
    if (running) {
      running.signal.abort(new BurrowError('INTERRUPTED', 'The turn was interrupted by a client.'))
      await running.done.catch(() => undefined)
      return { session_id: id, interrupted: true, turn: running.number }
    }
    return sessions.exclusive(session, async () => {
      const open = session.record.open_turn
      if (!open) return { session_id: id, interrupted: false, turn: null }
      await closeOpenTurn(session, 'INTERRUPTED', 'The turn was interrupted by a client.')
      await sessions.settle(session)
      return { session_id: id, interrupted: true, turn: open.turn }
    })
  }

  async compact(tenant: string, id: string, ctx: CallContext): Promise<CompactionOutcome> {
    const controller = this.parts.compaction
    if (!controller || !this.parts.capabilities.session_compaction) throw new BurrowError('SESSION_COMPACTION_DISABLED')
    this.refuseWhenShuttingDown()
    const sessions = this.parts.sessions
    await sessions.get(tenant, id) // an unknown session is SESSION_NOT_FOUND before anything else
    return this.idempotent(ctx, tenant, 'session/compact', id, {}, (receipt) =>
      this.admit(tenant, id, 'reject', ctx, (session, release) =>
        sessions.exclusive(session, async () => {
          // Under the session's lease: a compaction a dead replica committed with this key is final (see Receipt).
          if (receipt && sessions.leased) await receipt.ensureFirst()
          if (session.record.status === 'archived') throw new BurrowError('SESSION_ARCHIVED', `Session ${id} is archived.`)
          if (session.running || session.record.open_turn)
            throw new BurrowError('SESSION_BUSY', `A turn is running or waiting on session ${id}; compact it when the turn has ended.`)
          // Recorded under the session's last turn; it runs as the session's work, so an interrupt cancels
          // it. Its last event carries the request's outcome (compaction-controller.ts).
          const work = new Turn(session, session.record.turn_count, null, undefined, receipt)
          work.trace = ctx.trace
          const cfg = session.record.config.compaction ?? this.parts.compactionDefaults
          work.done = controller.run(work, cfg, true)
          session.running = work
          try {
            const outcome = (await work.done) as CompactionOutcome
            await sessions.settle(session)
            return outcome
          } finally {
            session.running = null
            release()
          }
        }),
      ),
    )
  }

  async turn(tenant: string, id: string, req: StartTurn, ctx: CallContext, op: string): Promise<TurnResult> {
    this.refuseWhenShuttingDown()
    const sessions = this.parts.sessions
    const session = await sessions.get(tenant, id)
    // With leases, taking the session's lease closes such a turn (LiveSessions.exclusive).
    if (!sessions.leased && (await closeAbandonedTurn(session))) await sessions.settle(session)
    const allowContinue = op === 'session/resume'
    return this.idempotent(
      ctx,
      tenant,
      op,
      id,
      req,
      (receipt) =>
        this.admit(
          tenant,
          id,
          req.on_busy ?? 'reject',
          ctx,
          (s, release) =>
            sessions.exclusive(s, async () => {
              try {
                // Replicas: checked under the session's lease, once a dead replica's run of it was closed.
                if (receipt && sessions.leased) await receipt.ensureFirst()
                // on_busy interrupt closes a turn paused for tool results — once the new request is known to be valid.
                const replacing =
                  req.on_busy === 'interrupt' && req.tool_results === undefined && s.record.open_turn?.state === 'requires_action'
                const start = turnStart(s, req, this.rules, { allowContinue, replacingPaused: replacing })
                if (replacing) await this.closePaused(s)
                return await this.runTurn(s, start, ctx, release, receipt)
              } finally {
                release() // the next turn in line starts at once, under this lease if it is still held
              }
            }),
          // A new turn's request is checked before it waits or interrupts: an invalid one never cancels anything.
          req.tool_results === undefined
            ? (s) => void turnStart(s, req, this.rules, { allowContinue, ahead: true, replacingPaused: req.on_busy === 'interrupt' })
            : undefined,
        ),
      (outcome) => this.replayOutcome(session.id, outcome, ctx),
    )
  }

  /** Runs `run` holding the session's slot, as the busy policy says (turn-admission.ts). */
  private admit<T>(
    tenant: string,
    id: string,
    policy: OnBusy,
    ctx: CallContext,
    run: Admitted<T>,
    precheck?: (session: LiveSession) => void,
  ): Promise<T> {
    return admitted(this.admission, tenant, id, policy, ctx.onQueued, run, precheck)
  }

  /** `on_busy: interrupt` ends a turn paused for tool results as an interrupt would, before the new turn starts. */
  private async closePaused(session: LiveSession): Promise<void> {
    await closeOpenTurn(session, 'INTERRUPTED', SUPERSEDED)
    await this.parts.sessions.settle(session)
  }

  /**
   * Runs a turn holding the session's slot. The slot is given up (`release`) as soon as the turn's last
   * event is emitted, before it is durable: a turn queued behind it then starts at once, and its first
   * events join the same group commit (docs/api.md "The busy policy"). This turn's answer still waits
   * until its own events are durable — and only its own.
   */
  private async runTurn(
    session: LiveSession,
    start: TurnStart,
    ctx: CallContext,
    release: () => void,
    receipt: Receipt | null,
  ): Promise<TurnResult> {
    const turn = Turn.starting(session, start, ctx.onEvent ?? null, receipt)
    turn.trace = ctx.trace
    const t0 = performance.now()
    session.running = turn
    const done = this.parts.runner.run(turn, start)
    turn.done = done
    let settling = false
    const ended = () => {
      if (session.running === turn) session.running = null
      // The session reads as running until this turn's events are durable (listed), then not.
      if (!settling) session.settling++
      settling = true
      release()
    }
    try {
      const result = await done
      ended()
      await this.parts.sessions.settle(session, 'so-far') // acknowledged only once durable
      this.parts.telemetry.turnEnded(result.status, (performance.now() - t0) / 1000)
      return result
    } catch (err) {
      ended()
      this.parts.telemetry.turnEnded('failed', (performance.now() - t0) / 1000)
      await this.parts.sessions.settle(session, 'so-far')
      throw err
    } finally {
      if (settling) session.settling--
    }
  }

  /** A retried turn's caller gets the first run's events on its stream, then its remembered result. */
  private async replayOutcome(id: string, outcome: IdempotencyRecord['outcome'], ctx: CallContext): Promise<void> {
    if (!ctx.onEvent) return
    const data = (outcome.ok ? outcome.value : outcome.data) as { first_seq?: number; last_seq?: number } | undefined
    if (typeof data?.first_seq !== 'number' || typeof data.last_seq !== 'number') return
    for (const e of await this.replay.range(id, data.first_seq, data.last_seq)) ctx.onEvent(e)
  }
}
