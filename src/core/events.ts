import type { ContentBlock, Message, ToolCall } from './messages.js'
import type { Static } from 'typebox'
import type { SessionChanges, SessionConfig } from './session-record.js'
import type { ModelSettings, UsageSchema } from './wire.js'

/**
 * Event types (docs/api.md, Events). Every type except `text_delta` is stored in the event
 * log and replayable. Burrow's own additions: `assistant_message` records each
 * completed LLM step (the assistant's message and that call's usage) so history can be
 * rebuilt from the log, `note_set` / `note_deleted` record session notes, and
 * `session_updated` a change of the session's settings (`PATCH /v1/sessions/{id}`).
 */
export const EVENT_TYPES = [
  'session_created',
  'turn_started',
  'text_delta',
  'assistant_message',
  'tool_call',
  'tool_result',
  'turn_requires_action',
  'turn_completed',
  'turn_failed',
  'compaction_started',
  'compaction_completed',
  'compaction_failed',
  'memory_indexed',
  'session_archived',
  'note_set',
  'note_deleted',
  'session_updated',
] as const

export type EventType = (typeof EVENT_TYPES)[number]

/** Stream-only control frame sent before a replay that cannot start where asked. */
export const STREAM_TRUNCATED = 'stream_truncated'

export type Usage = Static<typeof UsageSchema>

/**
 * `turn_failed.data.reason` of a turn whose LLM call the provider refused as a bad request
 * (HTTP 400/413/422): the reducer takes the turn's messages out of the history, so what was
 * rejected (an image it cannot take, an input it refuses, one too long) is never sent again.
 * The events stay in the log, marked by that `turn_failed`.
 */
export const INPUT_REJECTED = 'input_rejected'

/**
 * The event envelope, identical on every surface.
 * Invariant: for stored events `seq` is per-session monotonic and gapless from 1.
 * A `text_delta` is not stored: it carries the seq of the last stored event before it.
 */
export interface EventEnvelope<T extends EventType = EventType> {
  seq: number
  session_id: string
  turn: number
  type: T
  at: string
  data: EventData[T]
}

export interface EventData {
  session_created: { config: SessionConfig }
  /**
   * `settings`: the model settings the request gave (not the session's defaults); `max_tokens` repeats its max_tokens for older readers.
   * `idempotency`: the request's Idempotency-Key and fingerprint, when it had one (the run's outcome is recorded under it).
   */
  turn_started: {
    input: ContentBlock[] | null
    continuation: boolean
    max_tokens?: number
    settings?: ModelSettings
    idempotency?: { key: string; fingerprint: string }
  }
  text_delta: { text: string }
  assistant_message: { message: Message; usage: Usage; stop_reason: string; model: string; step: number; client_tool_call_ids?: string[] }
  tool_call: ToolCall & { executor: 'client' | 'server' }
  tool_result: { tool_call_id: string; name: string; content: ContentBlock[] | string; is_error: boolean; synthetic?: boolean }
  turn_requires_action: { tool_calls: ToolCall[] }
  /** `output_json`: the final answer parsed, when the turn asked for response_format json_schema. */
  turn_completed: { output_text: string; usage: Usage; stop_reason: string; output_json?: unknown }
  /**
   * `reason: 'input_rejected'`: the provider refused the turn's request as such (HTTP 400/413/422); the turn's
   * messages, events `rejected_seq_range` (inclusive), are out of the history and never sent again.
   */
  turn_failed: { code: string; message: string; reason?: string; rejected_seq_range?: [number, number]; usage: Usage }
  compaction_started: { input_tokens: number; estimated_history_tokens: number; message_count: number }
  compaction_completed: {
    summary_tokens: number
    messages_before: number
    messages_after: number
    summary: string
    discarded_seq_range: [number, number] | null
    /** Tokens the summary calls used; counted in the session's `compaction_tokens` and budget. */
    usage?: Usage
  }
  compaction_failed: { error: string; code?: string; usage?: Usage }
  memory_indexed: { entries: number }
  session_archived: Record<string, never>
  note_set: { key: string; value: string; by: 'client' | 'agent' }
  note_deleted: { key: string; by: 'client' | 'agent' }
  /** The settings a PATCH changed, with their new values in full (metadata: the whole new map). */
  session_updated: { changes: SessionChanges }
}

export function isStoredEventType(type: EventType): boolean {
  return type !== 'text_delta'
}
