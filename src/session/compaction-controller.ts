import type { Compactor } from '../core/compactor.js'
import { BurrowError, toBurrowError } from '../core/errors.js'
import type { Logger } from '../core/logger.js'
import { NO_TRACING, withinSpan, type Span, type Tracer } from '../core/tracing.js'
import type { EffectiveCompaction, SessionRecord } from '../core/session-record.js'
import type { IdempotencyRecord } from '../core/stores.js'
import type { CompactionOutcome } from '../core/wire.js'
import { CompactionError } from './default-compactor.js'
import { failedOutcome } from './idempotency.js'
import type { Seal } from './live-session.js'
import type { Turn } from './turn.js'

/** The history estimate (docs/guarantees.md, Compaction): `sum(JSON.stringify(message).length) / 4`, integer division. O(1). */
export function estimatedHistoryTokens(r: SessionRecord): number {
  return Math.floor(r.history_chars / 4)
}

/**
 * Decides when a session compacts and records it. Checked before every LLM call of the
 * loop except a session's first; fires on reported input tokens, the history estimate or
 * the message count; the loop guard counts LLM-call boundaries since the last attempt.
 * A failed compaction is recorded (`compaction_failed`) and the turn goes on. What it
 * discards reaches semantic memory through the commit of `compaction_completed` (the
 * session's commit listeners are told; see session-listener.ts).
 */
export class CompactionController {
  constructor(
    private readonly compactor: Compactor,
    private readonly logger: Logger,
    private readonly tracer: Tracer = NO_TRACING,
  ) {}

  shouldCompact(r: SessionRecord, cfg: EffectiveCompaction): boolean {
    if (r.session_boundary_index === 0) return false // never at a session's first boundary
    if (
      r.last_compaction_boundary_index !== null &&
      r.session_boundary_index - r.last_compaction_boundary_index < cfg.min_turns_between_compactions
    )
      return false
    return (
      r.last_input_tokens >= cfg.auto_compact_threshold ||
      estimatedHistoryTokens(r) >= cfg.auto_compact_threshold ||
      (cfg.max_history_messages !== null && r.messages.length > cfg.max_history_messages)
    )
  }

  /** The agent loop's pre-LLM-call hook. Throws only when the turn is interrupted. */
  readonly beforeLlmCall = async (turn: Turn): Promise<void> => {
    const cfg = turn.record.config.compaction
    if (!cfg || !this.shouldCompact(turn.record, cfg)) return
    await this.run(turn, cfg, false)
  }

  /**
   * Compacts now, recording its events under `turn` and cancelled by its signal. Automatic
   * runs swallow failures (recorded as events); a manual run throws the failure's error so
   * the caller sees it.
   */
  async run(turn: Turn, cfg: EffectiveCompaction, manual: boolean): Promise<CompactionOutcome> {
    const span = this.tracer.start('compaction', turn.trace)
    span.set('burrow.session.id', turn.session.id)
    span.set('burrow.turn.number', turn.number)
    span.set('burrow.compaction.manual', manual)
    return withinSpan(span, async () => {
      const outcome = await this.compact(turn, cfg, manual, span)
      span.set('burrow.compaction.compacted', outcome.compacted)
      span.set('burrow.compaction.messages_before', outcome.messages_before)
      span.set('burrow.compaction.messages_after', outcome.messages_after)
      if (outcome.reason) span.set('burrow.compaction.reason', outcome.reason)
      return outcome
    })
  }

  private async compact(turn: Turn, cfg: EffectiveCompaction, manual: boolean, span: Span): Promise<CompactionOutcome> {
    const { session, signal: cancel } = turn
    const r = session.record
    const before = r.messages.length
    const outcome = (compacted: boolean, after: number, summaryTokens: number, reason?: string): CompactionOutcome => ({
      session_id: session.id,
      compacted,
      messages_before: before,
      messages_after: after,
      summary_tokens: summaryTokens,
      ...(reason ? { reason } : {}),
    })
    turn.emit([
      {
        type: 'compaction_started',
        data: { input_tokens: r.last_input_tokens, estimated_history_tokens: estimatedHistoryTokens(r), message_count: before },
      },
    ])
    const original = r.messages
    const originalSeqs = r.message_seqs
    try {
      const result = await this.compactor.compact({
        model: r.config.model,
        systemPrompt: r.config.system_prompt,
        messages: original,
        config: cfg,
        ...(cancel.aborted ? {} : { signal: cancel.signal }),
        trace: span.context,
      })
      if (session.record.messages !== original) throw new CompactionError('the history changed while it was being summarised')
      const seqs = originalSeqs.slice(0, result.keepFrom)
      const range: [number, number] | null = seqs.length > 0 ? [Math.min(...seqs), Math.max(...seqs)] : null
      const done = outcome(true, result.messages.length, result.summaryTokens)
      turn.emit(
        [
          {
            type: 'compaction_completed',
            data: {
              summary_tokens: result.summaryTokens,
              messages_before: before,
              messages_after: result.messages.length,
              summary: result.summary,
              discarded_seq_range: range,
              usage: result.usage,
            },
          },
        ],
        sealed(manual, turn, { ok: true, value: done }),
      )
      return done
    } catch (err) {
      if (cancel.aborted) {
        turn.emit([{ type: 'compaction_failed', data: { error: 'interrupted', code: 'INTERRUPTED' } }])
        throw cancel.reason
      }
      // A provider failure carries its table code; "nothing to compact" and rejected rebuilds carry none.
      const e = err instanceof CompactionError ? err : toBurrowError(err)
      const code = e instanceof BurrowError ? e.code : undefined
      const usage = e instanceof BurrowError ? (e.data?.usage as { input_tokens: number; output_tokens: number } | undefined) : undefined
      if (code === 'INTERNAL') this.logger.error({ err, session_id: session.id }, 'compaction failed')
      else this.logger.warn({ session_id: session.id, code, error: e.message }, 'compaction failed; the history is unchanged')
      // A manual run answers "nothing compacted" for its own refusals and fails with a provider's error.
      const answer = manual && !(err instanceof CompactionError) ? null : outcome(false, before, 0, e.message)
      turn.emit(
        [{ type: 'compaction_failed', data: { error: e.message, ...(code ? { code } : {}), ...(usage ? { usage } : {}) } }],
        sealed(manual, turn, answer ? { ok: true, value: answer } : failedOutcome(e as BurrowError)),
      )
      // An automatic compaction's failure does not fail the turn, but its span says it failed.
      span.fail(code ?? 'COMPACTION_FAILED', e.message)
      if (answer) return answer
      throw e
    }
  }
}

/** A manual compaction's last event carries its request's outcome (with an Idempotency-Key); an automatic one's belongs to its turn. */
function sealed(manual: boolean, turn: Turn, outcome: IdempotencyRecord['outcome']): Seal | undefined {
  const receipt = turn.receipt
  return manual && receipt ? () => receipt.seal(outcome) : undefined
}
