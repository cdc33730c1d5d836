import { BurrowError } from '../core/errors.js'
import type { LlmClient, LlmDelta, LlmRequest, LlmResponse } from '../core/llm.js'
import type { ContentBlock, Message } from '../core/messages.js'
import { mapStreamError, type ProviderHttp } from './provider-http.js'
import { openAiSettings } from './settings-wire.js'
import { readSse } from './sse-reader.js'
import { estimateTokens, imageUrl, malformed, normaliseHistory, parseJson, parseToolInput, textOrPlaceholders } from './wire-helpers.js'

export interface OpenAiOptions {
  baseUrl: string
  apiKey?: string | undefined
  defaultModel: string
}

const FINISH: Record<string, string> = { stop: 'end_turn', tool_calls: 'tool_use', function_call: 'tool_use', length: 'max_tokens' }

/** OpenAI Chat Completions (and any compatible server: Ollama, vLLM, llama.cpp, OpenRouter), streaming. */
export class OpenAiProvider implements LlmClient {
  readonly provider = 'openai'
  readonly offline = false
  readonly defaultModel: string

  constructor(
    private readonly http: ProviderHttp,
    private readonly opts: OpenAiOptions,
  ) {
    this.defaultModel = opts.defaultModel
  }

  async complete(req: LlmRequest, onDelta?: (d: LlmDelta) => void): Promise<LlmResponse> {
    const body = this.body(req)
    const headers: Record<string, string> = {}
    if (this.opts.apiKey) headers.authorization = `Bearer ${this.opts.apiKey}`
    const url = `${this.opts.baseUrl.replace(/\/+$/, '')}/chat/completions`
    const res = await this.http.postJson('openai', url, headers, body, req.signal, undefined, req.trace)
    try {
      return await this.readStream(res.body, body, onDelta)
    } catch (err) {
      res.body.destroy()
      throw mapStreamError('openai', err, req.signal)
    }
  }

  /** The request body for a canonical request (exported for tests of the translation). */
  body(req: LlmRequest): Record<string, unknown> {
    const messages: unknown[] = []
    if (req.system) messages.push({ role: 'system', content: req.system })
    for (const m of normaliseHistory(req.messages)) messages.push(...toOpenAi(m))
    const limitKey = /^(o\d|gpt-5)/.test(req.model) ? 'max_completion_tokens' : 'max_tokens'
    const body: Record<string, unknown> = {
      model: req.model,
      messages,
      [limitKey]: req.maxTokens,
      stream: true,
      stream_options: { include_usage: true },
      ...openAiSettings(req),
    }
    if (req.tools && req.tools.length > 0) {
      body.tools = req.tools.map((t) => ({
        type: 'function',
        function: { name: t.name, ...(t.description ? { description: t.description } : {}), parameters: t.input_schema },
      }))
    }
    return body
  }

  private async readStream(
    stream: AsyncIterable<Uint8Array> & NodeJS.ReadableStream,
    body: unknown,
    onDelta?: (d: LlmDelta) => void,
  ): Promise<LlmResponse> {
    let text = ''
    const calls: Array<{ id: string; name: string; args: string }> = []
    let finish: string | null = null
    let usage: { prompt_tokens?: number; completion_tokens?: number } | null = null
    let done = false
    for await (const ev of readSse(stream)) {
      if (ev.data === '[DONE]') {
        done = true
        break
      }
      const chunk = parseJson('openai', ev.data) as {
        error?: { message?: string }
        choices?: Array<{
          delta?: {
            content?: string | null
            refusal?: string | null
            tool_calls?: Array<{ index: number; id?: string; function?: { name?: string; arguments?: string } }>
          }
          finish_reason?: string | null
        }>
        usage?: { prompt_tokens?: number; completion_tokens?: number } | null
      }
      if (chunk.error)
        throw new BurrowError('PROVIDER_ERROR', `openai stream error: ${chunk.error.message ?? 'unknown'}`, { provider: 'openai' })
      if (chunk.usage) usage = chunk.usage
      const choice = chunk.choices?.[0]
      if (!choice) continue
      const d = choice.delta
      // A refusal (structured output) is the answer's text: it then fails the response_format check, saying so.
      for (const piece of [d?.content, d?.refusal]) {
        if (!piece) continue
        text += piece
        onDelta?.({ type: 'text', text: piece })
      }
      for (const tc of d?.tool_calls ?? []) {
        if (typeof tc.index !== 'number') throw malformed('openai', 'tool call delta without index')
        const c = (calls[tc.index] ??= { id: '', name: '', args: '' })
        if (tc.id) c.id = tc.id
        if (tc.function?.name) c.name += tc.function.name
        if (tc.function?.arguments) c.args += tc.function.arguments
      }
      if (choice.finish_reason) finish = choice.finish_reason
    }
    if (!done) throw malformed('openai', 'the stream ended before [DONE]')
    if (finish === null) throw malformed('openai', 'no finish_reason')
    const stopReason = FINISH[finish] ?? finish
    const content: ContentBlock[] = []
    if (text) content.push({ type: 'text', text })
    for (const c of calls) {
      if (!c) continue
      const parsed = parseToolInput(c.args)
      if (!parsed.ok) {
        if (stopReason === 'max_tokens') continue // cut off mid-arguments: drop the incomplete call
        throw malformed('openai', `tool call ${c.id} arguments are not JSON`)
      }
      if (!c.id || !c.name) throw malformed('openai', 'tool call without id or name')
      content.push({ type: 'tool_use', id: c.id, name: c.name, input: parsed.value })
    }
    return {
      content,
      stopReason: content.some((b) => b.type === 'tool_use') ? 'tool_use' : stopReason === 'tool_use' ? 'end_turn' : stopReason,
      usage: {
        input_tokens: usage?.prompt_tokens ?? estimateTokens(body),
        output_tokens: usage?.completion_tokens ?? estimateTokens(text) + calls.length * 10,
      },
    }
  }
}

function toOpenAi(m: Message): unknown[] {
  if (m.role === 'assistant') {
    const text = m.content
      .filter((b) => b.type === 'text')
      .map((b) => (b as { text: string }).text)
      .join('')
    const calls = m.content
      .filter((b) => b.type === 'tool_use')
      .map((b) => {
        const u = b as { id: string; name: string; input: unknown }
        return { id: u.id, type: 'function', function: { name: u.name, arguments: JSON.stringify(u.input ?? {}) } }
      })
    return [{ role: 'assistant', content: text || null, ...(calls.length > 0 ? { tool_calls: calls } : {}) }]
  }
  const out: unknown[] = []
  const rest: unknown[] = []
  for (const b of m.content) {
    if (b.type === 'tool_result')
      out.push({ role: 'tool', tool_call_id: b.tool_use_id, content: (b.is_error ? '[error] ' : '') + textOrPlaceholders(b.content) })
    else if (b.type === 'text') rest.push({ type: 'text', text: b.text })
    else if (b.type === 'image') rest.push({ type: 'image_url', image_url: { url: imageUrl(b) } })
  }
  if (rest.length > 0) {
    const allText = rest.every((p) => (p as { type: string }).type === 'text')
    out.push({ role: 'user', content: allText ? rest.map((p) => (p as { text: string }).text).join('\n') : rest })
  }
  return out
}
