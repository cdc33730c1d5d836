import type { Message } from './messages.js'
import type { EffectiveCompaction } from './session-record.js'

/** Verbatim texts of contract §10. */
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
  systemPrompt: string
  messages: readonly Message[]
  config: EffectiveCompaction
  signal: AbortSignal
}

export interface CompactionResult {
  summary: string
  summaryTokens: number
  messages: Message[]
  discarded: Message[]
}

/** Summarises and rebuilds a history. Implementations must return a provider-valid history. */
export interface Compactor {
  compact(ctx: CompactionContext): Promise<CompactionResult>
}
