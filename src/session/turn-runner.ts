import type { SchemaCompiler } from '../core/answer-schema.js'
import { BurrowError, toBurrowError } from '../core/errors.js'
import type { LlmRequest, LlmResponse, LlmSettings, ProviderRegistry } from '../core/llm.js'
import type { Logger } from '../core/logger.js'
import { textOf, type ToolCall, type ToolDefinition, type ToolUseBlock } from '../core/messages.js'
import type { SessionRecord } from '../core/session-record.js'
import type { Telemetry } from '../core/telemetry.js'
import { NO_TRACING, withinSpan, type Tracer } from '../core/tracing.js'
import type { BuiltinTool } from '../core/tools.js'
import type { ModelSettings, TurnResult } from '../core/wire.js'
import { checkBudget } from './budget.js'
import { closeOpenTurn } from './close-turn.js'
import { parseAnswer } from './model-settings.js'
import type { PendingEvent } from './live-session.js'
import { INPUT_REJECTED } from './session-reducer.js'
import { notesAccess } from './session-notes.js'
import type { Turn, TurnStart } from './turn.js'
import { outputTextSince, turnResult, turnUsage } from './turn-output.js'

/** What one LLM call of a turn is sent with. */
interface CallSettings {
  maxTokens: number
  settings: LlmSettings
}

/**
 * The settings of one LLM call of a turn: a required or named tool_choice forces the turn's first
 * call only — forced on every call, the loop could never answer — and the calls after it (`later`,
 * a continuation's too) are auto.
 */
function callSettings(s: ModelSettings, later: boolean, defaultMaxTokens: number): CallSettings {
  const { max_tokens, ...settings } = s
  if (later && settings.tool_choice !== undefined && settings.tool_choice !== 'none') delete settings.tool_choice
  return { maxTokens: max_tokens ?? defaultMaxTokens, settings }
}

/** What turn_started records of a request's own settings (max_tokens also on its own, as before settings existed). */
function settingsData(s: ModelSettings): { max_tokens?: number; settings?: ModelSettings } {
  if (Object.keys(s).length === 0) return {}
  return { ...(s.max_tokens ? { max_tokens: s.max_tokens } : {}), settings: s }
}

/** Runs before every LLM call of the loop except a session's first (compaction plugs in here). */
export type BeforeLlmCall = (turn: Turn) => Promise<void>

export interface TurnRunnerDeps {
  providers: ProviderRegistry
  builtinTools: readonly BuiltinTool[]
  /** Added to the system prompt of sessions with memory on (how to use the memory tools). */
  memoryGuide?: string | undefined
  beforeLlmCall?: BeforeLlmCall | undefined
  /** LLM calls one turn may make before it ends with stop_reason `max_steps`. */
  maxSteps: number
  defaultMaxTokens: number
  /** Compiles a turn's response_format schema (the final answer is checked against it). */
  schemas: SchemaCompiler
  telemetry: Telemetry
  /** Opens the turn's span (its LLM calls' spans are opened by the instrumented provider clients). */
  tracer?: Tracer | undefined
  logger: Logger
}

/**
 * The agent loop. Every state change goes through the turn's `emit`, so the log alone
 * can rebuild the session. On any failure the turn ends with `turn_failed`, open tool
 * calls get synthetic error results, and the history stays valid to send again.
 */
export class TurnRunner {
  constructor(private readonly deps: TurnRunnerDeps) {}

  /** The tools the service runs itself (their names are reserved in session configs). */
  get builtinTools(): readonly BuiltinTool[] {
    return this.deps.builtinTools
  }

  get schemas(): SchemaCompiler {
    return this.deps.schemas
  }

  run(turn: Turn, start: TurnStart): Promise<TurnResult> {
    const tracer = this.deps.tracer ?? NO_TRACING
    // Not async itself: with tracing off the turn costs no extra promise.
    return tracer.enabled ? this.traced(tracer, turn, start) : this.runTurn(turn, start)
  }

  private async traced(tracer: Tracer, turn: Turn, start: TurnStart): Promise<TurnResult> {
    const span = tracer.start('turn', turn.trace)
    span.set('gen_ai.operation.name', 'invoke_agent')
    span.set('gen_ai.conversation.id', turn.session.id)
    span.set('burrow.session.id', turn.session.id)
    span.set('burrow.turn.number', turn.number)
    span.set('burrow.turn.start', start.kind)
    turn.trace = span.context ?? turn.trace
    span.set('burrow.turn.status', 'failed') // until the turn ends otherwise
    return withinSpan(span, async () => {
      const result = await this.runTurn(turn, start)
      span.set('burrow.turn.status', result.status)
      span.set('burrow.turn.stop_reason', result.stop_reason)
      return result
    })
  }

  private async runTurn(turn: Turn, start: TurnStart): Promise<TurnResult> {
    const receipt = turn.receipt
    const request = receipt ? { idempotency: { key: receipt.callerKey, fingerprint: receipt.fingerprint } } : {}
    if (start.kind === 'input' || start.kind === 'continue') {
      const input = start.kind === 'input' ? start.input : null
      turn.emit([{ type: 'turn_started', data: { input, continuation: false, ...settingsData(start.settings), ...request } }])
    } else {
      const byId = new Map(start.results.map((r) => [r.tool_call_id, r]))
      const events: PendingEvent[] = [
        { type: 'turn_started', data: { input: null, continuation: true, ...settingsData(start.settings), ...request } },
      ]
      for (const call of turn.record.open_turn!.pending_tool_calls) {
        const r = byId.get(call.id)
        if (r)
          events.push({
            type: 'tool_result',
            data: { tool_call_id: call.id, name: call.name, content: r.content, is_error: r.is_error === true },
          })
      }
      turn.emit(events)
    }
    try {
      // Watched live, the model is called once the turn's start is published, so its text streams as it
      // comes; unwatched, the start is committed together with whatever follows it (group commit) —
      // unless the request has an Idempotency-Key and the model is a remote one: it is then called once
      // the key is bound to this run in the log, so a crash never leaves a billed call a retry would
      // repeat. (The in-process offline model costs nothing to call again, and its answer is already there.)
      if ((receipt && !this.deps.providers.resolve(turn.record.config.model).client.offline) || turn.session.watched())
        await turn.session.settled()
      return await this.loop(turn, start.effective, start.kind === 'tool_results')
    } catch (err) {
      throw await this.fail(turn, err)
    }
  }

  private async loop(turn: Turn, settings: ModelSettings, continuing: boolean): Promise<TurnResult> {
    const config = turn.record.config
    const builtins = this.deps.builtinTools.filter((t) => t.enabledFor({ memory: config.memory }))
    const builtinByName = new Map(builtins.map((t) => [t.definition.name, t]))
    const clientNames = new Set(config.tools.map((t) => t.name))
    const tools = [...config.tools, ...builtins.map((t) => t.definition)]
    const signal = turn.signal
    for (let step = 1; ; step++) {
      if (step > this.deps.maxSteps) return this.complete(turn, 'max_steps')
      checkBudget(turn.record)
      if (turn.record.session_boundary_index > 0 && this.deps.beforeLlmCall) {
        await this.deps.beforeLlmCall(turn)
        checkBudget(turn.record)
      }
      if (signal.aborted) throw signal.reason
      const resp = await this.callModel(turn, tools, callSettings(settings, continuing || step > 1, this.deps.defaultMaxTokens))
      const uses = resp.content.filter((b): b is ToolUseBlock => b.type === 'tool_use')
      const clientIds = uses.filter((u) => clientNames.has(u.name) && !builtinByName.has(u.name)).map((u) => u.id)
      const events: PendingEvent[] = [
        {
          type: 'assistant_message',
          data: {
            message: { role: 'assistant', content: resp.content },
            usage: resp.usage,
            stop_reason: resp.stopReason,
            model: turn.record.config.model,
            step,
            client_tool_call_ids: clientIds,
          },
        },
      ]
      for (const u of uses)
        events.push({
          type: 'tool_call',
          data: { id: u.id, name: u.name, input: u.input, executor: clientIds.includes(u.id) ? 'client' : 'server' },
        })
      // A final answer is committed together with the turn's end: one write instead of two.
      if (uses.length === 0) return this.complete(turn, resp.stopReason, events, resp, settings)
      if (clientIds.length === uses.length) return this.requireAction(turn, uses, resp.stopReason, events)
      turn.emit(events)

      for (const u of uses) {
        if (clientIds.includes(u.id)) continue
        if (signal.aborted) throw signal.reason
        const data = await this.runBuiltin(builtinByName.get(u.name), u, turn)
        turn.emit([{ type: 'tool_result', data }])
      }
      if (clientIds.length > 0)
        return this.requireAction(
          turn,
          uses.filter((u) => clientIds.includes(u.id)),
          resp.stopReason,
        )
    }
  }

  private async callModel(turn: Turn, tools: ToolDefinition[], { maxTokens, settings }: CallSettings): Promise<LlmResponse> {
    const { client, model } = this.deps.providers.resolve(turn.record.config.model)
    const signal = turn.signal
    const t0 = performance.now()
    let outcome: 'ok' | 'error' | 'timeout' | 'aborted' = 'ok'
    try {
      const req: LlmRequest = {
        model,
        system: this.systemPrompt(turn.record),
        messages: turn.record.messages,
        tools,
        maxTokens,
        settings,
        get signal() {
          return signal.signal
        },
        cancelled: () => signal.aborted,
        trace: turn.trace,
      }
      return await client.complete(req, (d) => turn.delta(d.text))
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
  systemPrompt(record: SessionRecord): string {
    const c = record.config
    const parts = [c.system_prompt]
    if (c.memory && this.deps.memoryGuide) parts.push(this.deps.memoryGuide)
    const notes = record.notes
    if (notes.length > 0)
      parts.push(
        `Session notes (kept across compaction; update them with note_set / note_delete):\n${notes.map((n) => `- ${n.key}: ${n.value}`).join('\n')}`,
      )
    return parts.filter(Boolean).join('\n\n')
  }

  private async runBuiltin(tool: BuiltinTool | undefined, u: ToolUseBlock, turn: Turn) {
    const base = { tool_call_id: u.id, name: u.name }
    if (!tool) return { ...base, content: `Unknown tool: ${u.name}. Available tools are listed in the request.`, is_error: true }
    const { session, signal } = turn
    try {
      const out = await tool.execute(u.input, {
        tenant: session.tenant,
        sessionId: session.id,
        turn: turn.number,
        signal: signal.signal,
        session: notesAccess(session, turn.number, 'agent'),
        trace: turn.trace,
      })
      return { ...base, content: out.content, is_error: out.is_error === true }
    } catch (err) {
      if (signal.aborted) throw signal.reason
      const e = toBurrowError(err)
      this.deps.logger.warn({ err, tool: u.name, session_id: session.id }, 'builtin tool failed')
      return { ...base, content: `Tool ${u.name} failed: ${e.code === 'INTERNAL' ? 'internal error' : e.message}`, is_error: true }
    }
  }

  /**
   * Ends the turn; `before` (the final assistant message) is committed in the same batch. A final
   * answer that response_format asks to be JSON is checked first: one that does not match is
   * recorded, and the turn fails (PROVIDER_ERROR).
   */
  private complete(turn: Turn, stopReason: string, before: PendingEvent[] = [], last?: LlmResponse, settings?: ModelSettings): TurnResult {
    let parsed: { value: unknown } | null = null
    try {
      parsed = last ? parseAnswer(settings?.response_format, textOf(last.content), this.deps.schemas) : null
    } catch (err) {
      turn.emit(before)
      throw err
    }
    const usage = turnUsage(turn.record, turn.number)
    const parts = [outputTextSince(turn.record, turn.startSeq), last ? textOf(last.content) : ''].filter(Boolean)
    const total = {
      input_tokens: usage.input_tokens + (last?.usage.input_tokens ?? 0),
      output_tokens: usage.output_tokens + (last?.usage.output_tokens ?? 0),
    }
    const json = parsed ? { output_json: parsed.value } : {}
    return turn.end(
      [...before, { type: 'turn_completed', data: { output_text: parts.join('\n\n'), usage: total, stop_reason: stopReason, ...json } }],
      () => ({ ...turnResult(turn, 'completed', stopReason, []), ...json }),
    )
  }

  /** Pauses the turn for the client to run `uses`; `before` is committed in the same batch. */
  private requireAction(turn: Turn, uses: ToolUseBlock[], stopReason: string, before: PendingEvent[] = []): TurnResult {
    const calls: ToolCall[] = uses.map((u) => ({ id: u.id, name: u.name, input: u.input }))
    return turn.end([...before, { type: 'turn_requires_action', data: { tool_calls: calls } }], () =>
      turnResult(turn, 'requires_action', stopReason, calls),
    )
  }

  /** Ends the open turn as failed; returns the error the caller should see. */
  private async fail(turn: Turn, err: unknown): Promise<BurrowError> {
    const { session, signal } = turn
    const e =
      signal.aborted && !(err instanceof BurrowError && err.code !== 'INTERRUPTED')
        ? signal.reason instanceof BurrowError
          ? signal.reason
          : new BurrowError('INTERRUPTED')
        : toBurrowError(err)
    if (e.code === 'INTERNAL') this.deps.logger.error({ err, session_id: session.id, turn: turn.number }, 'turn failed')
    if (session.broken) return e
    // A provider that refuses the request itself would refuse it again: the turn is rolled back out of the history.
    const reason = e.code === 'PROVIDER_ERROR' && e.data?.rejected === true ? INPUT_REJECTED : (e.data?.reason as string | undefined)
    try {
      const answer = await closeOpenTurn(session, e.code, e.message, reason, {
        data: e.data ?? {},
        firstSeq: turn.firstSeq,
        receipt: turn.receipt,
      })
      if (answer) return answer
    } catch (closeErr) {
      this.deps.logger.error({ err: closeErr, session_id: session.id }, 'could not record turn_failed')
      return new BurrowError('INTERNAL')
    }
    return new BurrowError(e.code, e.message, { ...e.data, turn: turn.number, first_seq: turn.firstSeq, last_seq: session.record.last_seq })
  }
}
