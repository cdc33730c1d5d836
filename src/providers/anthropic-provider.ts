import { BurrowError } from '../core/errors.js'
import type { LlmClient, LlmDelta, LlmRequest, LlmResponse } from '../core/llm.js'
import type { ContentBlock } from '../core/messages.js'
import type { ModelSettings } from '../core/wire.js'
import { mapStreamError, type ProviderHttp } from './provider-http.js'
import { anthropicSettings, anthropicSettingsProblem } from './settings-wire.js'
import { readSse } from './sse-reader.js'
import { malformed, normaliseHistory, parseJson, parseToolInput } from './wire-helpers.js'

export interface AnthropicOptions {
  baseUrl: string
  apiKey: string
  defaultModel: string
  version?: string
}

type Block = { kind: 'text'; text: string } | { kind: 'tool_use'; id: string; name: string; json: string } | { kind: 'other' }

/** Anthropic Messages API, streaming. */
export class AnthropicProvider implements LlmClient {
  readonly provider = 'anthropic'
  readonly offline = false
  readonly defaultModel: string

  constructor(
    private readonly http: ProviderHttp,
    private readonly opts: AnthropicOptions,
  ) {
    this.defaultModel = opts.defaultModel
  }

  settingsProblem(s: ModelSettings): { field: string; message: string } | null {
    return anthropicSettingsProblem(s)
  }

  async complete(req: LlmRequest, onDelta?: (d: LlmDelta) => void): Promise<LlmResponse> {
    const headers = { 'x-api-key': this.opts.apiKey, 'anthropic-version': this.opts.version ?? '2023-06-01' }
    const res = await this.http.postJson(
      'anthropic',
      `${this.opts.baseUrl.replace(/\/+$/, '')}/v1/messages`,
      headers,
      this.body(req),
      req.signal,
      undefined,
      req.trace,
    )
    try {
      return await this.readStream(res.body, onDelta)
    } catch (err) {
      res.body.destroy()
      throw mapStreamError('anthropic', err, req.signal)
    }
  }

  body(req: LlmRequest): Record<string, unknown> {
    const body: Record<string, unknown> = {
      model: req.model,
      max_tokens: req.maxTokens,
      stream: true,
      messages: normaliseHistory(req.messages).map((m) => ({ role: m.role, content: m.content })),
      ...anthropicSettings(req),
    }
    if (req.system) body.system = req.system
    if (req.tools && req.tools.length > 0) {
      body.tools = req.tools.map((t) => ({
        name: t.name,
        ...(t.description ? { description: t.description } : {}),
        input_schema: t.input_schema,
      }))
    }
    return body
  }

  private async readStream(stream: AsyncIterable<Uint8Array>, onDelta?: (d: LlmDelta) => void): Promise<LlmResponse> {
    const blocks: Block[] = []
    let inputTokens = 0
    let outputTokens = 0
    let stopReason: string | null = null
    let started = false
    let stopped = false
    for await (const ev of readSse(stream)) {
      const d = parseJson('anthropic', ev.data) as Record<string, any>
      const type = (d.type as string | undefined) ?? ev.event
      switch (type) {
        case 'message_start': {
          started = true
          const u = d.message?.usage ?? {}
          inputTokens = (u.input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0)
          outputTokens = u.output_tokens ?? 0
          break
        }
        case 'content_block_start': {
          const cb = d.content_block ?? {}
          blocks[d.index] =
            cb.type === 'text'
              ? { kind: 'text', text: cb.text ?? '' }
              : cb.type === 'tool_use'
                ? { kind: 'tool_use', id: cb.id, name: cb.name, json: '' }
                : { kind: 'other' }
          break
        }
        case 'content_block_delta': {
          const b = blocks[d.index]
          if (!b) throw malformed('anthropic', `delta for unknown block ${d.index}`)
          if (d.delta?.type === 'text_delta' && b.kind === 'text') {
            b.text += d.delta.text
            onDelta?.({ type: 'text', text: d.delta.text })
          } else if (d.delta?.type === 'input_json_delta' && b.kind === 'tool_use') {
            b.json += d.delta.partial_json ?? ''
          }
          break
        }
        case 'message_delta':
          if (d.delta?.stop_reason) stopReason = d.delta.stop_reason
          if (typeof d.usage?.output_tokens === 'number') outputTokens = d.usage.output_tokens
          if (typeof d.usage?.input_tokens === 'number') inputTokens = Math.max(inputTokens, d.usage.input_tokens)
          break
        case 'message_stop':
          stopped = true
          break
        case 'error':
          throw new BurrowError(
            'PROVIDER_ERROR',
            `anthropic stream error: ${d.error?.message ?? 'unknown'} (${d.error?.type ?? 'error'})`,
            { provider: 'anthropic' },
          )
        default:
          break // ping, content_block_stop, and types added later
      }
      if (stopped) break
    }
    if (!started) throw malformed('anthropic', 'no message_start')
    if (!stopped) throw malformed('anthropic', 'the stream ended before message_stop')
    const reason = stopReason ?? 'end_turn'
    const content: ContentBlock[] = []
    for (const b of blocks) {
      if (!b || b.kind === 'other') continue
      if (b.kind === 'text') {
        if (b.text) content.push({ type: 'text', text: b.text })
        continue
      }
      const parsed = parseToolInput(b.json)
      if (!parsed.ok) {
        if (reason === 'max_tokens') continue
        throw malformed('anthropic', `tool_use ${b.id} input is not JSON`)
      }
      content.push({ type: 'tool_use', id: b.id, name: b.name, input: parsed.value })
    }
    const hasTools = content.some((b) => b.type === 'tool_use')
    return {
      content,
      usage: { input_tokens: inputTokens, output_tokens: outputTokens },
      stopReason: hasTools ? 'tool_use' : reason === 'tool_use' ? 'end_turn' : reason,
    }
  }
}
