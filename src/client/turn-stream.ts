/**
 * A turn's own SSE stream (`POST …/turns` with `Accept: text/event-stream`) read back
 * into the `TurnResult` the JSON form of the route would have returned.
 *
 * The result is rebuilt from the events alone, folding them the way the server's reducer
 * does: `first_seq` is the `turn_started` seq, `last_seq` the final event's; messages come
 * from `turn_started.input`, `assistant_message`, `tool_result` and `compaction_completed`;
 * `turn_completed` carries `output_text`, `stop_reason` and the input/output usage of the
 * whole turn; `compaction_tokens` is summed from the compaction events.
 *
 * Exact for a turn started with `input`. For a continuation (`tool_results`) the stream
 * starts mid-turn, so what happened before it is not in the stream: a paused turn's
 * `output_text` and `usage` then cover only the streamed part, and a tool-results message
 * lacks the results of server-run tools answered before the pause. The client avoids
 * that loss when it can (see `BurrowClient`: with an idempotency key it re-asks for the
 * JSON result, which the server replays without running the model).
 */
import { createParser } from 'eventsource-parser'
import { SUMMARY_PREFIX } from '../core/compactor.js'
import { BurrowError, isErrorCode } from '../core/errors.js'
import type { EventData, EventEnvelope, Usage } from '../core/events.js'
import { textOf, type Message, type ToolResultBlock } from '../core/messages.js'
import type { TurnResult } from '../core/wire.js'
import { problemError } from './transport.js'

export type TurnOutcome = { kind: 'result'; result: TurnResult } | { kind: 'failed'; error: BurrowError }

export class TurnAssembler {
  private firstSeq: number | undefined
  private messages: Message[] = []
  /** Tool calls of the last assistant message still waiting for results; null when unknown (a continuation). */
  private pending: string[] | null = []
  private results: ToolResultBlock[] = []
  private texts: string[] = []
  private usage = { input_tokens: 0, output_tokens: 0, compaction_tokens: 0 }
  private stopReason = ''
  /** True when the stream began mid-turn (a continuation), so the rebuild may be partial. */
  continuation = false

  /** Folds one event in; returns the outcome once the turn has ended. */
  add(e: EventEnvelope): TurnOutcome | undefined {
    if (e.type === 'text_delta') return undefined
    switch (e.type) {
      case 'turn_started': {
        const d = e.data as EventData['turn_started']
        this.firstSeq ??= e.seq
        if (d.continuation) {
          this.continuation = true
          this.pending = null
        }
        if (d.input) this.messages.push({ role: 'user', content: d.input })
        return undefined
      }
      case 'assistant_message': {
        const d = e.data as EventData['assistant_message']
        this.flushResults()
        this.messages.push(d.message)
        const text = textOf(d.message.content)
        if (text) this.texts.push(text)
        this.usage.input_tokens += d.usage.input_tokens
        this.usage.output_tokens += d.usage.output_tokens
        this.stopReason = d.stop_reason
        this.pending = d.message.content.flatMap((b) => (b.type === 'tool_use' ? [b.id] : []))
        this.results = []
        return undefined
      }
      case 'tool_result': {
        const d = e.data as EventData['tool_result']
        const block: ToolResultBlock = {
          type: 'tool_result',
          tool_use_id: d.tool_call_id,
          content: d.content as ToolResultBlock['content'],
        }
        if (d.is_error) block.is_error = true
        this.results.push(block)
        if (this.pending && this.pending.every((id) => this.results.some((b) => b.tool_use_id === id))) this.flushResults()
        return undefined
      }
      case 'compaction_completed': {
        const d = e.data as EventData['compaction_completed']
        this.flushResults()
        const kept = Math.max(0, d.messages_after - 1)
        const summary: Message = { role: 'user', content: [{ type: 'text', text: `${SUMMARY_PREFIX}\n${d.summary}` }] }
        // As the server's result: the rebuilt history's suffix of messages added in this turn. When the
        // kept messages reach back before the turn, older ones precede them and the summary is not in it.
        if (kept <= this.messages.length) this.messages = [summary, ...this.messages.slice(this.messages.length - kept)]
        this.addCompaction(d.usage)
        return undefined
      }
      case 'compaction_failed':
        this.addCompaction((e.data as EventData['compaction_failed']).usage)
        return undefined
      case 'turn_completed': {
        const d = e.data as EventData['turn_completed']
        this.flushResults()
        const out = this.result(e, 'completed', d.output_text, d.stop_reason, [], {
          ...d.usage,
          compaction_tokens: this.usage.compaction_tokens,
        })
        if (out.kind === 'result' && d.output_json !== undefined) out.result.output_json = d.output_json
        return out
      }
      case 'turn_requires_action': {
        const d = e.data as EventData['turn_requires_action']
        return this.result(e, 'requires_action', this.texts.join('\n\n'), this.stopReason, d.tool_calls, { ...this.usage })
      }
      case 'turn_failed': {
        const d = e.data as EventData['turn_failed']
        const data: Record<string, unknown> = { turn: e.turn, first_seq: this.firstSeq ?? e.seq, last_seq: e.seq }
        if (d.reason) data.reason = d.reason
        const error = isErrorCode(d.code)
          ? new BurrowError(d.code, d.message, data)
          : new BurrowError('INTERNAL', d.message, { ...data, code: d.code })
        return { kind: 'failed', error }
      }
      default:
        return undefined
    }
  }

  private result(
    e: EventEnvelope,
    status: TurnResult['status'],
    outputText: string,
    stopReason: string,
    toolCalls: TurnResult['tool_calls'],
    usage: TurnResult['usage'],
  ): TurnOutcome {
    const result: TurnResult = {
      session_id: e.session_id,
      turn: e.turn,
      status,
      output_text: outputText,
      messages: this.messages,
      tool_calls: toolCalls,
      usage,
      stop_reason: stopReason,
      first_seq: this.firstSeq ?? e.seq,
      last_seq: e.seq,
    }
    return { kind: 'result', result }
  }

  private flushResults(): void {
    if (this.results.length === 0) return
    const order = this.pending ?? []
    const rank = (b: ToolResultBlock) => {
      const i = order.indexOf(b.tool_use_id)
      return i < 0 ? order.length : i
    }
    this.messages.push({ role: 'user', content: [...this.results].sort((a, b) => rank(a) - rank(b)) })
    this.results = []
    this.pending = []
  }

  private addCompaction(u: Usage | undefined): void {
    if (u) this.usage.compaction_tokens += u.input_tokens + u.output_tokens
  }
}

/** What reading a turn stream gave: the outcome (undefined if the stream ended first) and why it broke, if it did. */
export interface TurnRead {
  outcome: TurnOutcome | undefined
  assembler: TurnAssembler
  broken?: unknown
}

/**
 * Reads a turn's SSE response to its end: every envelope goes to `onEvent` as it arrives. A turn
 * cut off with no stored end (its events could not be stored) ends with a `stream_closed` frame
 * holding the problem document: the outcome is that error, as the JSON form would have thrown.
 * A `turn_queued` frame goes to `onQueued`. A failed body read (a reset connection, a timeout) is returned as `broken`; an exception
 * thrown by `onEvent` propagates as is (after the response is closed).
 */
export async function readTurnStream(
  res: Response,
  onEvent: (e: EventEnvelope) => void,
  onQueued?: (position: number | null) => void,
): Promise<TurnRead> {
  const assembler = new TurnAssembler()
  if (!res.body) return { outcome: undefined, assembler }
  let outcome: TurnOutcome | undefined
  let bad: unknown
  const parser = createParser({
    onEvent(m) {
      if (outcome || bad) return
      let e: EventEnvelope
      try {
        e = JSON.parse(m.data) as EventEnvelope
      } catch (err) {
        bad = err
        return
      }
      if (m.event === 'turn_queued') {
        // The turn waits for the session (on_busy: queue): its place in line, or null behind another replica.
        onQueued?.((e as unknown as { data: { position: number | null } }).data.position)
        return
      }
      if (m.event === 'stream_closed') {
        // The turn was cut off with no stored end: the server's last frame holds the problem document.
        const problem = (e as unknown as { data?: { problem?: unknown } }).data?.problem
        if (problem && typeof problem === 'object') outcome = { kind: 'failed', error: problemError(problem as Record<string, unknown>) }
        return
      }
      onEvent(e)
      outcome = assembler.add(e)
    },
  })
  const reader = res.body.getReader()
  const decoder = new TextDecoder()
  let broken: unknown
  try {
    while (!outcome && !bad) {
      let chunk: Awaited<ReturnType<typeof reader.read>>
      try {
        chunk = await reader.read()
      } catch (err) {
        broken = err
        break
      }
      if (chunk.done) break
      parser.feed(decoder.decode(chunk.value, { stream: true }))
    }
  } finally {
    // Ends the response whatever stopped the read (the turn's end, bad data, a throwing onEvent).
    await reader.cancel().catch(() => undefined)
    reader.releaseLock()
  }
  if (bad) throw new BurrowError('INTERNAL', 'The turn stream carried a frame that is not JSON.', { transport: 'protocol' }, { cause: bad })
  return broken === undefined ? { outcome, assembler } : { outcome, assembler, broken }
}
