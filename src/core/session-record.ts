import type { Message, ToolCall, ToolDefinition, ToolResultBlock } from './messages.js'
import type { Static } from 'typebox'
import type { EffectiveCompactionSchema, ModelSettings, NoteSchema, SessionStatus, TurnUsageSchema } from './wire.js'

/** The compaction settings a session runs with: the request's, defaults filled in. */
export type EffectiveCompaction = Static<typeof EffectiveCompactionSchema>

/** What a session was created with; carried in full by its `session_created` event. */
export interface SessionConfig {
  tenant: string
  model: string
  system_prompt: string
  metadata: Record<string, string>
  memory: boolean
  compaction: EffectiveCompaction | null
  tools: ToolDefinition[]
  max_total_tokens: number | null
  /** Defaults of every turn's model settings (absent in sessions created before they existed: none). */
  model_settings?: ModelSettings
  /** Set on a fork (`POST …/fork`): the session and the seq it was forked from. */
  forked_from?: ForkOrigin
}

/** Where a fork came from: its history is the source's up to and including event `seq`. */
export interface ForkOrigin {
  session_id: string
  seq: number
}

/** The settings a session's owner may change after creation (`session_updated`); effective from the next turn. */
export type SessionChanges = Partial<Pick<SessionConfig, 'metadata' | 'system_prompt' | 'tools' | 'compaction' | 'model_settings'>>

export type TokenTotals = Static<typeof TurnUsageSchema>

/** The turn that has started and not yet ended. */
export interface OpenTurn {
  turn: number
  /** `running` while the loop works; `requires_action` while it waits for client tool results. */
  state: 'running' | 'requires_action'
  first_seq: number
  /** Tool calls of the last assistant message still without a result, in call order. */
  pending_tool_calls: ToolCall[]
  /** Which of those are client-executed (the rest run inside the loop). */
  client_tool_call_ids: string[]
  /** Results gathered so far for `pending_tool_calls`. */
  results: ToolResultBlock[]
  /** The model settings the turn's request gave (its `turn_started`): a continuation runs with them too. */
  settings?: ModelSettings
  /**
   * The request that runs the turn now, when it came with an Idempotency-Key (its `turn_started`):
   * whoever ends the run — the loop, or recovery closing it after a crash — commits that key's
   * outcome with the run's last events. Gone once the turn pauses: the pause was that request's outcome.
   */
  request?: TurnRequest
}

/** An idempotent request running a turn: its caller's key, its fingerprint, and the seq of its run's first event. */
export interface TurnRequest {
  key: string
  fingerprint: string
  first_seq: number
}

/**
 * A session's state, derived from its event log by the session reducer and nothing
 * else: `rebuild(log)` equals the live record. Snapshots of it are a cache.
 */
export interface SessionRecord {
  session_id: string
  created_at: string
  updated_at: string
  status: SessionStatus
  config: SessionConfig
  /** The history sent to the provider (after compactions). */
  messages: Message[]
  /** For each message, the seq of the event that added it (parallel to `messages`). */
  message_seqs: number[]
  /** For each message, the turn it belongs to (parallel to `messages`). */
  message_turns: number[]
  turn_count: number
  last_seq: number
  usage: TokenTotals
  usage_by_turn: Array<TokenTotals & { turn: number }>
  tool_stats: Record<string, { calls: number; failures: number }>
  open_turn: OpenTurn | null
  /** Input tokens the provider reported on the last LLM call (0 after a compaction, until the next call). */
  last_input_tokens: number
  /**
   * Sum of `JSON.stringify(message).length` over `messages`, kept as messages come and go,
   * so the history estimate (this / 4) costs O(1) per check.
   */
  history_chars: number
  /** LLM-call boundaries seen by this session (compaction cadence). */
  session_boundary_index: number
  last_compaction_boundary_index: number | null
  compactions: number
  /**
   * Bumped whenever the history is replaced rather than appended to: a compaction, or a turn
   * whose input the provider rejected being rolled back. Stores rewrite the whole history then.
   */
  history_generation: number
  /** Session notes, oldest first (at most NOTES_MAX; pinned into every LLM call's system prompt). */
  notes: SessionNote[]
}

export type SessionNote = Static<typeof NoteSchema>

export const NOTES_MAX = 200
export const NOTE_VALUE_MAX = 2000
