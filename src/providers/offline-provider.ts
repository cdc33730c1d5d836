import { COMPACTION_PROMPT } from '../core/compactor.js'
import type { LlmClient, LlmDelta, LlmRequest, LlmResponse } from '../core/llm.js'
import { textOf, type ContentBlock, type Message } from '../core/messages.js'
import { estimateTokens } from './wire-helpers.js'

const TOOL_DIRECTIVE = /^\/tool\s+([a-zA-Z0-9_-]{1,64})(?:\s+([\s\S]*))?$/

/**
 * Deterministic, network-free provider for demos and tests. It echoes the last user
 * input (`echo: …`), calls a tool when asked with `/tool <name> <json>`, reports
 * estimated usage, and answers a compaction request with an extractive summary.
 */
export class OfflineProvider implements LlmClient {
  readonly provider = 'offline'
  readonly offline = true
  readonly defaultModel = 'offline:echo'

  async complete(req: LlmRequest, onDelta?: (d: LlmDelta) => void): Promise<LlmResponse> {
    const content = this.answer(req)
    const text = textOf(content)
    // Stream word by word, yielding between chunks so the call is interruptible like a real one.
    for (const piece of text.match(/\S+\s*|\s+/g) ?? []) {
      if (req.signal?.aborted) throw req.signal.reason
      onDelta?.({ type: 'text', text: piece })
      await new Promise<void>((r) => setImmediate(r))
    }
    if (req.signal?.aborted) throw req.signal.reason
    return {
      content,
      usage: { input_tokens: estimateTokens({ s: req.system, m: req.messages, t: req.tools }), output_tokens: Math.max(1, estimateTokens(text)) },
      stopReason: content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
    }
  }

  private answer(req: LlmRequest): ContentBlock[] {
    const last = req.messages[req.messages.length - 1]
    if (!last) return [{ type: 'text', text: 'echo: ' }]
    const lastText = textOf(last.content)
    if (last.role === 'user' && lastText.includes(COMPACTION_PROMPT)) {
      return [{ type: 'text', text: extractiveSummary(req.messages.slice(0, -1), req.maxTokens) }]
    }
    if (last.content.some((b) => b.type === 'tool_result')) {
      const results = last.content.flatMap((b) => (b.type === 'tool_result' ? [`${b.is_error ? 'error' : 'result'}: ${typeof b.content === 'string' ? b.content : textOf(b.content)}`] : []))
      return [{ type: 'text', text: `tool ${results.join('; ')}` }]
    }
    const m = TOOL_DIRECTIVE.exec(lastText.trim())
    if (m && req.tools?.some((t) => t.name === m[1])) {
      let input: unknown = {}
      try { input = m[2] ? JSON.parse(m[2]) : {} } catch { input = { text: m[2] } }
      const n = req.messages.length
      return [{ type: 'tool_use', id: `offline_${n}_${m[1]}`, name: m[1]!, input }]
    }
    return [{ type: 'text', text: `echo: ${lastText}` }]
  }
}

/** The first sentence of each message, newest last, within the token budget. */
export function extractiveSummary(messages: readonly Message[], maxTokens: number): string {
  const lines: string[] = []
  for (const m of messages) {
    const t = textOf(m.content).replace(/\s+/g, ' ').trim()
    if (!t) continue
    const sentence = (/^.*?[.!?](\s|$)/.exec(t)?.[0] ?? t).trim().slice(0, 200)
    lines.push(`- ${m.role}: ${sentence}`)
  }
  const header = 'Summary of earlier conversation:\n'
  // The header counts against the budget too (~4 chars a token, as estimateTokens).
  const budget = Math.max(0, maxTokens * 4 - header.length)
  let out = ''
  for (let i = lines.length - 1; i >= 0; i--) {
    const next = `${lines[i]}\n${out}`
    if (next.length > budget) break
    out = next
  }
  return `${header}${out}`.trim()
}
