import type { LlmClient, LlmDelta, LlmRequest, LlmResponse } from '../core/llm.js'
import type { Telemetry } from '../core/telemetry.js'
import type { ModelSettings } from '../core/wire.js'
import { withinSpan, type TraceContext, type Tracer } from '../core/tracing.js'

/**
 * Wraps a provider so that every LLM call — a turn's and a compaction's alike — counts its
 * tokens (`Telemetry.llmUsage`) and, with tracing on, runs in a client span named with the
 * OpenTelemetry GenAI conventions (`chat {model}`, `gen_ai.*` attributes) under `req.trace`.
 * The provider is handed the span's own context, which it sends as `traceparent`.
 */
export class InstrumentedLlmClient implements LlmClient {
  readonly provider: string
  readonly offline: boolean
  readonly defaultModel: string

  constructor(
    private readonly inner: LlmClient,
    private readonly tracer: Tracer,
    private readonly telemetry: Telemetry,
  ) {
    this.provider = inner.provider
    this.offline = inner.offline
    this.defaultModel = inner.defaultModel
  }

  settingsProblem(s: ModelSettings): { field: string; message: string } | null {
    return this.inner.settingsProblem?.(s) ?? null
  }

  async complete(req: LlmRequest, onDelta?: (d: LlmDelta) => void): Promise<LlmResponse> {
    if (!this.tracer.enabled) return this.counted(req.model, await this.inner.complete(req, onDelta))
    const span = this.tracer.start(`chat ${req.model}`, req.trace, 'client')
    span.set('gen_ai.operation.name', 'chat')
    // `gen_ai.system` is the older name of `gen_ai.provider.name`; backends read one or the other.
    span.set('gen_ai.system', this.provider)
    span.set('gen_ai.provider.name', this.provider)
    span.set('gen_ai.request.model', req.model)
    span.set('gen_ai.request.max_tokens', req.maxTokens)
    const s = req.settings
    if (s?.temperature !== undefined) span.set('gen_ai.request.temperature', s.temperature)
    if (s?.top_p !== undefined) span.set('gen_ai.request.top_p', s.top_p)
    if (s?.stop) span.set('gen_ai.request.stop_sequences', s.stop)
    return withinSpan(span, async () => {
      const resp = this.counted(req.model, await this.inner.complete(withTrace(req, span.context), onDelta))
      span.set('gen_ai.response.model', req.model)
      span.set('gen_ai.usage.input_tokens', resp.usage.input_tokens)
      span.set('gen_ai.usage.output_tokens', resp.usage.output_tokens)
      span.set('gen_ai.response.finish_reasons', [resp.stopReason])
      return resp
    })
  }

  private counted(model: string, resp: LlmResponse): LlmResponse {
    this.telemetry.llmUsage(this.provider, model, resp.usage.input_tokens, resp.usage.output_tokens)
    return resp
  }
}

/** The same request under another span; `signal` stays lazy (the caller may create it on first read). */
function withTrace(req: LlmRequest, trace: TraceContext | undefined): LlmRequest {
  return {
    model: req.model,
    system: req.system,
    messages: req.messages,
    tools: req.tools,
    maxTokens: req.maxTokens,
    settings: req.settings,
    get signal() {
      return req.signal
    },
    cancelled: req.cancelled,
    trace,
  }
}
