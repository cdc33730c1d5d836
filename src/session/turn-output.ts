import { textOf, type Message, type ToolCall } from '../core/messages.js'
import type { SessionRecord } from '../core/session-record.js'
import type { TurnResult } from '../core/wire.js'
import type { Turn } from './turn.js'

/** A turn's token usage so far (zeros before its first LLM call). */
export function turnUsage(record: SessionRecord, turn: number): { input_tokens: number; output_tokens: number; compaction_tokens: number } {
  const t = record.usage_by_turn.findLast((x) => x.turn === turn)
  return { input_tokens: t?.input_tokens ?? 0, output_tokens: t?.output_tokens ?? 0, compaction_tokens: t?.compaction_tokens ?? 0 }
}

/** Messages added at or after `firstSeq` (walks back from the end: O(messages of this turn)). */
export function messagesSince(record: SessionRecord, firstSeq: number): Message[] {
  let i = record.messages.length
  while (i > 0 && record.message_seqs[i - 1]! >= firstSeq) i--
  return record.messages.slice(i)
}

/** The assistant's text since `firstSeq`, one paragraph per message. */
export function outputTextSince(record: SessionRecord, firstSeq: number): string {
  const parts: string[] = []
  for (const m of messagesSince(record, firstSeq)) {
    if (m.role !== 'assistant') continue
    const t = textOf(m.content)
    if (t) parts.push(t)
  }
  return parts.join('\n\n')
}

/** What a run of a turn answers once its last event is recorded: the messages of this run, the text of the whole turn. */
export function turnResult(turn: Turn, status: TurnResult['status'], stopReason: string, toolCalls: ToolCall[]): TurnResult {
  const r = turn.record
  return {
    session_id: r.session_id,
    turn: turn.number,
    status,
    output_text: outputTextSince(r, turn.startSeq),
    messages: messagesSince(r, turn.firstSeq),
    tool_calls: toolCalls,
    usage: turnUsage(r, turn.number),
    stop_reason: stopReason,
    first_seq: turn.firstSeq,
    last_seq: r.last_seq,
  }
}
