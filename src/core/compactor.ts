import type { Usage } from './events.js'
import type { Message } from './messages.js'
import type { EffectiveCompaction } from './session-record.js'
import type { TraceContext } from './tracing.js'

/** Verbatim compaction texts (the prompt and the summary prefix; docs/guarantees.md, Compaction). */
export const COMPACTION_PROMPT = `You are performing a CONTEXT COMPACTION. Your job is to create a handoff summary so work can continue seamlessly.

Include:
- Current progress and key decisions made
- Important context, constraints, or user preferences discovered
- What remains to be done (clear next steps)
- Any critical data, file paths, examples, or references needed to continue
- Tool call patterns that worked or failed

Be concise and structured. Prioritize information the next context needs to act, not narrate.`

export const SUMMARY_PREFIX = `[Context compacted] A previous context produced the following summary of work so far. The current tool and session state is preserved. Use this summary to continue without duplicating work:`

export interface CompactionContext {
  /** The session's model (`provider:model`): summaries are made with it. */
  model: string
  systemPrompt: string
  messages: readonly Message[]
  config: EffectiveCompaction
  signal?: AbortSignal | undefined
  /** The compaction's span: the parent of its summary calls' spans. */
  trace?: TraceContext | undefined
}

export interface CompactionResult {
  summary: string
  /** Output tokens of the (last) summary call. */
  summaryTokens: number
  /** Every token the summary calls used (counted as compaction tokens). */
  usage: Usage
  /** Index of the first kept message: `messages` = summary + original[keepFrom..]. */
  keepFrom: number
  /** The rebuilt history: the summary message, then the kept messages untouched. */
  messages: Message[]
  /** original[0..keepFrom), in original order. */
  discarded: Message[]
}

/**
 * Summarises and rebuilds a history. Invariants of the result: no tool result without
 * its call, no call without its result, no turn split, order kept, and
 * `discarded ++ messages[1..] == original`. An implementation that cannot meet them throws.
 */
export interface Compactor {
  compact(ctx: CompactionContext): Promise<CompactionResult>
}
