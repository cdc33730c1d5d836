import type { EventEnvelope } from '../core/events.js'
import { BurrowError, invalidRequest, toBurrowError, type ErrorCode } from '../core/errors.js'
import type { LlmRequest, LlmResponse, ProviderRegistry } from '../core/llm.js'
import type { Logger } from '../core/logger.js'
import { textOf, type ContentBlock, type Message, type ToolCall, type ToolResultInput, type ToolUseBlock } from '../core/messages.js'
import type { Telemetry } from '../core/telemetry.js'
import type { BuiltinTool, ToolSession } from '../core/tools.js'
import { NOTE_VALUE_MAX } from '../core/session-record.js'
import type { TurnResult } from '../core/wire.js'
import type { Cancellation } from './cancellation.js'
import type { LiveSession, PendingEvent } from './live-session.js'
import { INPUT_REJECTED, totalTokens } from './session-reducer.js'

/** Runs before every LLM call of the loop except a session's first (compaction plugs in here). */
export type BeforeLlmCall = (session: LiveSession, turn: number, signal: Cancellation) => Promise<void>

export interface TurnRunnerDeps {
  providers: ProviderRegistry
  builtinTools: readonly BuiltinTool[]
  /** Added to the system prompt of sessions with memory on (how to use the memory tools). */
  memoryGuide?: string | undefined
  beforeLlmCall?: BeforeLlmCall | undefined
  /** LLM calls one turn may make before it ends with stop_reason `max_steps`. */
  maxSteps: number
  defaultMaxTokens: number
  telemetry: Telemetry
  logger: Logger
}

export type TurnStart =
  | { kind: 'input'; input: ContentBlock[]; maxTokens?: number | undefined }
  /** A new turn without new input: the model answers the history as it stands (resume after a crash). */
  | { kind: 'continue'; maxTokens?: number | undefined }
  | { kind: 'tool_results'; results: ToolResultInput[]; maxTokens?: number | undefined }

/**
 * The agent loop. Every state change goes through `session.emit`, so the log alone
 * can rebuild the session. On any failure the turn ends with `turn_failed`, open tool
 * calls get synthetic error results, and the history stays valid to send again.
 */
export class TurnRunner {
  constructor(private readonly deps: TurnRunnerDeps) {}

  async run(session: LiveSession, start: TurnStart, signal: Cancellation): Promise<TurnResult> {
    const firstSeq = session.record.last_seq + 1
    let turn: number
    if (start.kind === 'input' || start.kind === 'continue') {
      turn = session.record.turn_count + 1
      const input = start.kind === 'input' ? start.input : null
      session.emit(turn, [{ type: 'turn_started', data: { input, continuation: false, ...(start.maxTokens ? { max_tokens: start.maxTokens } : {}) } }])
    } else {
      turn = session.record.open_turn!.turn
      const pending = session.record.open_turn!.pending_tool_calls
      const byId = new Map(start.results.map((r) => [r.tool_call_id, r]))
      const events: PendingEvent[] = [{ type: 'turn_started', data: { input: null, continuation: true } }]
      for (const call of pending) {
        const r = byId.get(call.id)
        if (r) events.push({ type: 'tool_result', data: { tool_call_id: call.id, name: call.name, content: r.content, is_error: r.is_error === true } })
      }
      session.emit(turn, events)
    }
    try {
      // Watched live, the model is called once the turn's start is published, so its text streams as it
      // comes; unwatched, the start is committed together with whatever follows it (group commit).
      if (session.watched()) await session.settled()
      return await this.loop(session, turn, firstSeq, start.maxTokens ?? this.deps.defaultMaxTokens, signal)
    } catch (err) {
      throw await this.fail(session, turn, firstSeq, err, signal)
    }
  }

  private async loop(session: LiveSession, turn: number, firstSeq: number, maxTokens: number, signal: Cancellation): Promise<TurnResult> {
    const turnFirstSeq = session.record.open_turn?.first_seq ?? firstSeq
    const builtins = this.deps.builtinTools.filter((t) => t.enabledFor({ memory: session.record.config.memory }))
    const builtinByName = new Map(builtins.map((t) => [t.definition.name, t]))
    const clientNames = new Set(session.record.config.tools.map((t) => t.name))
    const tools = [...session.record.config.tools, ...builtins.map((t) => t.definition)]
    for (let step = 1; ; step++) {
      if (step > this.deps.maxSteps) return this.complete(session, turn, firstSeq, turnFirstSeq, 'max_steps')
      checkBudget(session)
      if (session.record.session_boundary_index > 0 && this.deps.beforeLlmCall) {
        await this.deps.beforeLlmCall(session, turn, signal)
        checkBudget(session)
      }
      if (signal.aborted) throw signal.reason
      const resp = await this.callModel(session, turn, tools, maxTokens, signal)
      const uses = resp.content.filter((b): b is ToolUseBlock => b.type === 'tool_use')
      const clientIds = uses.filter((u) => clientNames.has(u.name) && !builtinByName.has(u.name)).map((u) => u.id)
      const events: PendingEvent[] = [{
        type: 'assistant_message',
        data: {
          message: { role: 'assistant', content: resp.content }, usage: resp.usage, stop_reason: resp.stopReason,
          model: session.record.config.model, step, client_tool_call_ids: clientIds,
        },
      }]
      for (const u of uses) events.push({ type: 'tool_call', data: { id: u.id, name: u.name, input: u.input, executor: clientIds.includes(u.id) ? 'client' : 'server' } })
      // A final answer is committed together with the turn's end: one write instead of two.
      if (uses.length === 0) return this.complete(session, turn, firstSeq, turnFirstSeq, resp.stopReason, events, resp)
      const clientOnly = clientIds.length === uses.length
      if (clientOnly) {
        const calls: ToolCall[] = uses.map((u) => ({ id: u.id, name: u.name, input: u.input }))
        session.emit(turn, [...events, { type: 'turn_requires_action', data: { tool_calls: calls } }])
        return this.result(session, turn, firstSeq, turnFirstSeq, 'requires_action', resp.stopReason, calls)
      }
      session.emit(turn, events)

      for (const u of uses) {
        if (clientIds.includes(u.id)) continue
        if (signal.aborted) throw signal.reason
        const data = await this.runBuiltin(builtinByName.get(u.name), u, session, turn, signal)
        session.emit(turn, [{ type: 'tool_result', data }])
      }
      if (clientIds.length > 0) {
        const calls: ToolCall[] = uses.filter((u) => clientIds.includes(u.id)).map((u) => ({ id: u.id, name: u.name, input: u.input }))
        session.emit(turn, [{ type: 'turn_requires_action', data: { tool_calls: calls } }])
        return this.result(session, turn, firstSeq, turnFirstSeq, 'requires_action', resp.stopReason, calls)
      }
    }
  }

  private async callModel(session: LiveSession, turn: number, tools: TurnRunnerDeps['builtinTools'][number]['definition'][], maxTokens: number, signal: Cancellation): Promise<LlmResponse> {
    const { client, model } = this.deps.providers.resolve(session.record.config.model)
    const t0 = performance.now()
    let outcome: 'ok' | 'error' | 'timeout' | 'aborted' = 'ok'
    try {
      const req: LlmRequest = {
        model, system: this.systemPrompt(session), messages: session.record.messages, tools, maxTokens,
        get signal() { return signal.signal },
        cancelled: () => signal.aborted,
      }
      return await client.complete(req, (d) => session.delta(turn, d.text))
    } catch (err) {
      outcome = signal.aborted ? 'aborted' : err instanceof BurrowError && err.code === 'PROVIDER_TIMEOUT' ? 'timeout' : 'error'
      throw err
    } finally {
      this.deps.telemetry.providerCall(client.provider, outcome, (performance.now() - t0) / 1000)
    }
  }

  /**
   * The system prompt of one LLM call: the session's own (verbatim), then the memory guide
   * when memory is on, then the session notes — pinned, so compaction never drops them.
   */
  systemPrompt(session: LiveSession): string {
    const c = session.record.config
    const parts = [c.system_prompt]
    if (c.memory && this.deps.memoryGuide) parts.push(this.deps.memoryGuide)
    const notes = session.record.notes
    if (notes.length > 0) parts.push(`Session notes (kept across compaction; update them with note_set / note_delete):\n${notes.map((n) => `- ${n.key}: ${n.value}`).join('\n')}`)
    return parts.filter(Boolean).join('\n\n')
  }

  private async runBuiltin(tool: BuiltinTool | undefined, u: ToolUseBlock, session: LiveSession, turn: number, signal: Cancellation) {
    const base = { tool_call_id: u.id, name: u.name }
    if (!tool) return { ...base, content: `Unknown tool: ${u.name}. Available tools are listed in the request.`, is_error: true }
    try {
      const out = await tool.execute(u.input, { tenant: session.tenant, sessionId: session.id, turn, signal: signal.signal, session: notesAccess(session, turn, 'agent') })
      return { ...base, content: out.content, is_error: out.is_error === true }
    } catch (err) {
      if (signal.aborted) throw signal.reason
      const e = toBurrowError(err)
      this.deps.logger.warn({ err, tool: u.name, session_id: session.id }, 'builtin tool failed')
      return { ...base, content: `Tool ${u.name} failed: ${e.code === 'INTERNAL' ? 'internal error' : e.message}`, is_error: true }
    }
  }

  /** Ends the turn; `before` (the final assistant message) is committed in the same batch. */
  private async complete(session: LiveSession, turn: number, firstSeq: number, turnFirstSeq: number, stopReason: string,
    before: PendingEvent[] = [], last?: LlmResponse): Promise<TurnResult> {
    const usage = turnUsage(session, turn)
    const parts = [outputTextSince(session, turnFirstSeq), last ? textOf(last.content) : ''].filter(Boolean)
    const total = { input_tokens: usage.input_tokens + (last?.usage.input_tokens ?? 0), output_tokens: usage.output_tokens + (last?.usage.output_tokens ?? 0) }
    session.emit(turn, [...before, { type: 'turn_completed', data: { output_text: parts.join('\n\n'), usage: total, stop_reason: stopReason } }])
    return this.result(session, turn, firstSeq, turnFirstSeq, 'completed', stopReason, [])
  }

  private result(session: LiveSession, turn: number, firstSeq: number, turnFirstSeq: number, status: TurnResult['status'], stopReason: string, toolCalls: ToolCall[]): TurnResult {
    const r = session.record
    return {
      session_id: r.session_id, turn, status, output_text: outputTextSince(session, turnFirstSeq), messages: messagesSince(session, firstSeq),
      tool_calls: toolCalls, usage: turnUsage(session, turn), stop_reason: stopReason, first_seq: firstSeq, last_seq: r.last_seq,
    }
  }

  /** Ends the open turn as failed; returns the error the caller should see. */
  private async fail(session: LiveSession, turn: number, firstSeq: number, err: unknown, signal: Cancellation): Promise<BurrowError> {
    const e = signal.aborted && !(err instanceof BurrowError && err.code !== 'INTERRUPTED')
      ? (signal.reason instanceof BurrowError ? signal.reason : new BurrowError('INTERRUPTED'))
      : toBurrowError(err)
    if (e.code === 'INTERNAL') this.deps.logger.error({ err, session_id: session.id, turn }, 'turn failed')
    if (session.broken) return e
    // A provider that refuses the request itself would refuse it again: the turn is rolled back out of the history.
    const reason = e.code === 'PROVIDER_ERROR' && e.data?.rejected === true ? INPUT_REJECTED : (e.data?.reason as string | undefined)
    try {
      await closeOpenTurn(session, e.code, e.message, reason)
    } catch (closeErr) {
      this.deps.logger.error({ err: closeErr, session_id: session.id }, 'could not record turn_failed')
      return new BurrowError('INTERNAL')
    }
    return new BurrowError(e.code, e.message, { ...e.data, turn, first_seq: firstSeq, last_seq: session.record.last_seq })
  }
}

/**
 * Ends a session's open turn with `turn_failed`: every tool call still without a
 * result gets a synthetic error result first, so no tool call is left dangling.
 */
export async function closeOpenTurn(session: LiveSession, code: ErrorCode | string, message: string, reason?: string): Promise<EventEnvelope[]> {
  const open = session.record.open_turn
  if (!open) return []
  const answered = new Set(open.results.map((r) => r.tool_use_id))
  const events: PendingEvent[] = []
  for (const c of open.pending_tool_calls) {
    if (answered.has(c.id)) continue
    events.push({ type: 'tool_result', data: { tool_call_id: c.id, name: c.name, content: `Tool call not completed: the turn ended (${code}).`, is_error: true, synthetic: true } })
  }
  const u = turnUsage(session, open.turn)
  // A rejected turn names the events it takes out of the history: they stay in the log, visible.
  const rejected = reason === INPUT_REJECTED ? { rejected_seq_range: [open.first_seq, session.record.last_seq + events.length] as [number, number] } : {}
  events.push({ type: 'turn_failed', data: { code, message, ...(reason ? { reason } : {}), ...rejected, usage: { input_tokens: u.input_tokens, output_tokens: u.output_tokens } } })
  return session.emit(open.turn, events)
}

/**
 * A turn the store says is running but nobody in this process runs: its events stopped reaching
 * the store (a failed write broke the session, which was then loaded back from the store). It is
 * closed as crash recovery closes one, so the session takes its next turn instead of answering
 * SESSION_BUSY for ever. Returns whether it closed one (the caller waits for it to be durable:
 * while the store still refuses writes that fails with STORE_UNAVAILABLE, and the next request tries again).
 */
export async function closeAbandonedTurn(session: LiveSession): Promise<boolean> {
  if (session.running || session.record.open_turn?.state !== 'running') return false
  await closeOpenTurn(session, 'STORE_UNAVAILABLE', 'The turn stopped when its events could not be stored.', 'store_unavailable')
  return true
}

/** Notes of a live session, changed through events (so the log records them). */
export function notesAccess(session: LiveSession, turn: number, by: 'client' | 'agent', fields = { key: 'key', value: 'value' }): ToolSession {
  return {
    notes: () => session.record.notes.map((n) => ({ key: n.key, value: n.value })),
    async setNote(key, value) {
      if (!NOTE_KEY.test(key)) throw invalidRequest(fields.key, 'must be 1–128 letters, digits, _ . : -')
      if (value.length > NOTE_VALUE_MAX) throw invalidRequest(fields.value, `must be at most ${NOTE_VALUE_MAX} characters`)
      session.emit(turn, [{ type: 'note_set', data: { key, value, by } }])
    },
    async deleteNote(key) {
      if (!session.record.notes.some((n) => n.key === key)) return false
      session.emit(turn, [{ type: 'note_deleted', data: { key, by } }])
      return true
    },
  }
}

const NOTE_KEY = /^[A-Za-z0-9_.:-]{1,128}$/

function checkBudget(session: LiveSession): void {
  const max = session.record.config.max_total_tokens
  if (max !== null && totalTokens(session.record.usage) >= max) {
    throw new BurrowError('BUDGET_EXCEEDED', `The session has used ${totalTokens(session.record.usage)} of its ${max} max_total_tokens.`)
  }
}

export function assertBudget(session: LiveSession): void { checkBudget(session) }

function turnUsage(session: LiveSession, turn: number) {
  const t = session.record.usage_by_turn.findLast((x) => x.turn === turn)
  return { input_tokens: t?.input_tokens ?? 0, output_tokens: t?.output_tokens ?? 0, compaction_tokens: t?.compaction_tokens ?? 0 }
}

/** Messages added at or after `firstSeq` (walks back from the end: O(messages of this turn)). */
function messagesSince(session: LiveSession, firstSeq: number): Message[] {
  const r = session.record
  let i = r.messages.length
  while (i > 0 && r.message_seqs[i - 1]! >= firstSeq) i--
  return r.messages.slice(i)
}

function outputTextSince(session: LiveSession, firstSeq: number): string {
  const parts: string[] = []
  for (const m of messagesSince(session, firstSeq)) {
    if (m.role !== 'assistant') continue
    const t = textOf(m.content)
    if (t) parts.push(t)
  }
  return parts.join('\n\n')
}
