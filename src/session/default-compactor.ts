import { COMPACTION_PROMPT, type CompactionContext, type CompactionResult, type Compactor } from '../core/compactor.js'
import { BurrowError } from '../core/errors.js'
import type { ProviderRegistry } from '../core/llm.js'
import { checkHistory, textOf, type Message } from '../core/messages.js'
import { checkRebuild, chunkHistory, planRebuild, prepareForSummarization } from './history-rebuild.js'
import { summaryMessage } from './session-reducer.js'

export class CompactionError extends Error {}

/**
 * Summarises a history with the session's own model (no tools, `max_summary_tokens`),
 * in several calls when it is too large for one, then rebuilds it: the summary message
 * and the last complete turns. The rebuilt history is checked before it is returned.
 */
export class DefaultCompactor implements Compactor {
  constructor(private readonly providers: ProviderRegistry) {}

  async compact(ctx: CompactionContext): Promise<CompactionResult> {
    const plan = planRebuild(ctx.messages, ctx.config.recent_turn_budget)
    if ('reason' in plan) throw new CompactionError(`nothing to compact: ${plan.reason}`)
    const { client, model } = this.providers.resolve(ctx.model)
    // Everything is summarised (the kept turns too, for context); a trailing call still
    // waiting for its results is left out, as providers would reject it.
    let source = prepareForSummarization(ctx.messages)
    if (checkHistory(source)?.problem.includes('without its tool_result')) source = source.slice(0, -1)
    // One call may carry about the compaction threshold; bigger histories are summarised in chunks,
    // each call refining the summary so far.
    const chunks = chunkHistory(source, Math.max(4096, ctx.config.auto_compact_threshold * 4))
    let summary = ''
    let summaryTokens = 0
    const usage = { input_tokens: 0, output_tokens: 0 }
    try {
      for (const chunk of chunks) {
        const messages: Message[] = [
          ...(summary ? [summaryMessage(summary)] : []),
          ...chunk,
          { role: 'user', content: [{ type: 'text', text: COMPACTION_PROMPT }] },
        ]
        const resp = await client.complete({
          model,
          system: ctx.systemPrompt,
          messages,
          tools: [],
          maxTokens: ctx.config.max_summary_tokens,
          ...(ctx.signal ? { signal: ctx.signal } : {}),
          trace: ctx.trace,
        })
        usage.input_tokens += resp.usage.input_tokens
        usage.output_tokens += resp.usage.output_tokens
        const text = textOf(resp.content).trim()
        if (!text) throw new BurrowError('PROVIDER_ERROR', 'The summary call returned no text.')
        summary = text
        summaryTokens = resp.usage.output_tokens
      }
    } catch (err) {
      // Tokens already spent on earlier chunks still count against the session.
      if (err instanceof BurrowError && usage.input_tokens + usage.output_tokens > 0)
        throw new BurrowError(err.code, err.message, { ...err.data, usage })
      throw err
    }
    const kept = ctx.messages.slice(plan.keepFrom)
    const discarded = ctx.messages.slice(0, plan.keepFrom)
    const messages = [summaryMessage(summary), ...kept]
    const broken = checkRebuild(ctx.messages, plan.keepFrom, messages, discarded)
    if (broken) throw new CompactionError(`the rebuilt history was rejected: ${broken}`)
    return { summary, summaryTokens, usage, keepFrom: plan.keepFrom, messages, discarded }
  }
}
