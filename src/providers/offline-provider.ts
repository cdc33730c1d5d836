import { COMPACTION_PROMPT } from '../core/compactor.js'
import type { LlmClient, LlmDelta, LlmRequest, LlmResponse } from '../core/llm.js'
import { textOf, type ContentBlock, type Message } from '../core/messages.js'
import { schemaInstance } from './schema-instance.js'
import { estimateTokens } from './wire-helpers.js'

const TOOL_DIRECTIVE = /^\/tool\s+([a-zA-Z0-9_-]{1,64})(?:\s+([\s\S]*))?$/

/**
 * Deterministic, network-free provider for demos and tests. It echoes the last user
 * input (`echo: …`), calls a tool when asked with `/tool <name> <json>`, reports
 * estimated usage, and answers a compaction request with an extractive summary.
 * Of the model settings it honours those with a deterministic meaning: `tool_choice` (none: no
 * tool call; required or a named tool: that call, its input built from the tool's schema),
 * `response_format` (a JSON answer built from the schema, see schema-instance.ts), `stop`
 * (the answer ends before the first stop sequence) and `max_tokens` (an answer longer than that,
 * counted as its usage is — four characters a token — is cut there, stop_reason `max_tokens`, as
 * a real model's would be, half a JSON answer included). Sampling settings and reasoning effort
 * change nothing.
 */
export class OfflineProvider implements LlmClient {
  readonly provider = 'offline'
  readonly offline = true
  readonly defaultModel = 'offline:echo'

  async complete(req: LlmRequest, onDelta?: (d: LlmDelta) => void): Promise<LlmResponse> {
    const stop = stopAt(this.shaped(req), req.settings?.stop)
    const { content, cut } = cutAt(stop.content, req.maxTokens)
    const text = textOf(content)
    // Stream word by word, yielding once per few words so the call is interruptible like a real one.
    const pieces = text.match(/\S+\s*|\s+/g) ?? []
    for (let i = 0; i < pieces.length; i++) {
      checkAborted(req)
      onDelta?.({ type: 'text', text: pieces[i]! })
      if (i % 8 === 7) {
        await yieldToLoop()
        checkAborted(req)
      }
    }
    await yieldToLoop()
    checkAborted(req)
    return {
      content,
      usage: { input_tokens: estimateRequestTokens(req), output_tokens: Math.max(1, estimateTokens(text)) },
      stopReason: content.some((b) => b.type === 'tool_use')
        ? 'tool_use'
        : stop.stopped
          ? 'stop_sequence'
          : cut
            ? 'max_tokens'
            : 'end_turn',
    }
  }

  /** The answer, as the call's tool_choice and response_format shape it. */
  private shaped(req: LlmRequest): ContentBlock[] {
    const choice = req.settings?.tool_choice
    const tools = choice === 'none' ? undefined : req.tools
    const content = this.answer({ ...req, tools })
    if (content.some((b) => b.type === 'tool_use') || !tools || tools.length === 0) return this.formatted(req, content)
    const forced = typeof choice === 'object' ? tools.find((t) => t.name === choice.name) : choice === 'required' ? tools[0] : undefined
    if (!forced) return this.formatted(req, content)
    const input = schemaInstance(forced.input_schema, lastUserText(req))
    return [{ type: 'tool_use', id: `offline_${req.messages.length}_${forced.name}`, name: forced.name, input }]
  }

  private formatted(req: LlmRequest, content: ContentBlock[]): ContentBlock[] {
    const format = req.settings?.response_format
    if (format?.type !== 'json_schema' || content.some((b) => b.type === 'tool_use')) return content
    return [{ type: 'text', text: JSON.stringify(schemaInstance(format.json_schema.schema, textOf(content))) }]
  }

  private answer(req: LlmRequest): ContentBlock[] {
    const last = req.messages[req.messages.length - 1]
    if (!last) return [{ type: 'text', text: 'echo: ' }]
    const lastText = textOf(last.content)
    if (last.role === 'user' && lastText.includes(COMPACTION_PROMPT)) {
      return [{ type: 'text', text: extractiveSummary(req.messages.slice(0, -1), req.maxTokens) }]
    }
    if (last.content.some((b) => b.type === 'tool_result')) {
      const results = last.content.flatMap((b) =>
        b.type === 'tool_result'
          ? [`${b.is_error ? 'error' : 'result'}: ${typeof b.content === 'string' ? b.content : textOf(b.content)}`]
          : [],
      )
      return [{ type: 'text', text: `tool ${results.join('; ')}` }]
    }
    const m = TOOL_DIRECTIVE.exec(lastText.trim())
    if (m && req.tools?.some((t) => t.name === m[1])) {
      let input: unknown = {}
      try {
        input = m[2] ? JSON.parse(m[2]) : {}
      } catch {
        input = { text: m[2] }
      }
      const n = req.messages.length
      return [{ type: 'tool_use', id: `offline_${n}_${m[1]}`, name: m[1]!, input }]
    }
    return [{ type: 'text', text: `echo: ${lastText}` }]
  }
}

function lastUserText(req: LlmRequest): string {
  const last = req.messages[req.messages.length - 1]
  return last ? textOf(last.content) : ''
}

/** A text answer cut to `maxTokens` (as estimateTokens counts them: four characters a token); a tool call is never cut. */
function cutAt(content: ContentBlock[], maxTokens: number): { content: ContentBlock[]; cut: boolean } {
  if (content.length !== 1 || content[0]!.type !== 'text') return { content, cut: false }
  const text = content[0]!.text
  if (estimateTokens(text) <= maxTokens) return { content, cut: false }
  return { content: [{ type: 'text', text: text.slice(0, maxTokens * 4) }], cut: true }
}

/** The answer cut before the first stop sequence in its text (a tool call is never cut). */
function stopAt(content: ContentBlock[], stop: readonly string[] | undefined): { content: ContentBlock[]; stopped: boolean } {
  if (!stop || content.length !== 1 || content[0]!.type !== 'text') return { content, stopped: false }
  const text = content[0]!.text
  const at = Math.min(...stop.map((s) => text.indexOf(s)).filter((i) => i >= 0))
  if (!Number.isFinite(at)) return { content, stopped: false }
  return { content: [{ type: 'text', text: text.slice(0, at) }], stopped: true }
}

const yieldToLoop = () => new Promise<void>((r) => setImmediate(r))

/** Reads the signal only when the caller armed one (`cancelled` lets a caller say so without making one). */
function checkAborted(req: LlmRequest): void {
  if (req.cancelled ? req.cancelled() : req.signal?.aborted) throw req.signal!.reason
}

const historyChars = new WeakMap<readonly Message[], { count: number; chars: number; last: Message | undefined }>()

/**
 * About the JSON size / 4 of the request. Histories grow by appending to the same array,
 * so the size of the prefix seen before is kept and only new messages are measured:
 * O(new messages) per call instead of O(history). A replaced history is re-measured.
 */
function estimateRequestTokens(req: LlmRequest): number {
  const msgs = req.messages
  let c = historyChars.get(msgs)
  if (!c || c.count > msgs.length || (c.count > 0 && msgs[c.count - 1] !== c.last)) c = { count: 0, chars: 0, last: undefined }
  for (let i = c.count; i < msgs.length; i++) c.chars += messageChars(msgs[i]!)
  c.count = msgs.length
  c.last = msgs[msgs.length - 1]
  historyChars.set(msgs, c)
  const chars = c.chars + (req.system?.length ?? 0) + (req.tools && req.tools.length > 0 ? JSON.stringify(req.tools).length : 0)
  return Math.ceil(chars / 4)
}

/** Characters a message takes as JSON, near enough for an estimate and without serialising text. */
function messageChars(m: Message): number {
  let n = 30
  for (const b of m.content) {
    if (b.type === 'text') n += b.text.length + 25
    else if (b.type === 'tool_use') n += b.name.length + b.id.length + JSON.stringify(b.input ?? {}).length + 50
    else if (b.type === 'tool_result')
      n += b.tool_use_id.length + (typeof b.content === 'string' ? b.content.length : JSON.stringify(b.content).length) + 50
    else n += JSON.stringify(b).length
  }
  return n
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
