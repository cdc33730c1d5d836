import type { ContentBlock, Message, ToolDefinition } from './messages.js'
import type { Static } from 'typebox'
import type { Usage } from './events.js'
import type { ModelSettings, ProviderStatusSchema } from './wire.js'
import type { TraceContext } from './tracing.js'

/** `provider:model`, e.g. `anthropic:claude-sonnet-4-5`, `openai:gpt-4o-mini`, `offline:echo`. */
export interface ModelRef {
  provider: string
  model: string
}

export function parseModelRef(value: string): ModelRef | null {
  const i = value.indexOf(':')
  if (i <= 0 || i === value.length - 1) return null
  return { provider: value.slice(0, i), model: value.slice(i + 1) }
}

export interface LlmRequest {
  model: string
  system?: string
  messages: readonly Message[]
  tools?: readonly ToolDefinition[]
  maxTokens: number
  /**
   * How the call is sampled and shaped (a turn's model settings but max_tokens, which is `maxTokens`).
   * Providers send what their API has; `tool_choice` is sent only with tools.
   */
  settings?: LlmSettings | undefined
  /** Aborts the call; it then rejects with `signal.reason`. */
  signal?: AbortSignal
  /** A cheap way to ask whether the call is cancelled without creating `signal` (which may be made lazily). */
  cancelled?: () => boolean
  /**
   * The span this call belongs to (a turn's or a compaction's). The instrumented client opens
   * the LLM-call span under it and hands the provider that span's context instead, which the
   * provider sends as `traceparent`.
   */
  trace?: TraceContext | undefined
}

export type LlmSettings = Omit<ModelSettings, 'max_tokens'>

/** Streamed while a call runs; the final {@link LlmResponse} is authoritative. */
export type LlmDelta = { type: 'text'; text: string }

export interface LlmResponse {
  /** The assistant message: text and tool_use blocks in the order the model produced them. */
  content: ContentBlock[]
  usage: Usage
  /** Normalised: `end_turn` | `tool_use` | `max_tokens` | `stop_sequence` | provider-specific. */
  stopReason: string
}

/**
 * One provider. Implementations stream, translate the canonical message model to
 * their wire format, and throw `BurrowError` with `PROVIDER_ERROR`,
 * `PROVIDER_TIMEOUT` or `PROVIDER_NOT_CONFIGURED` — never anything else.
 * An aborted `signal` rejects with the signal's reason.
 */
export interface LlmClient {
  readonly provider: string
  /** True for the deterministic, network-free provider. */
  readonly offline: boolean
  readonly defaultModel: string
  complete(req: LlmRequest, onDelta?: (d: LlmDelta) => void): Promise<LlmResponse>
  /** Why this provider cannot take these settings (e.g. a temperature out of its range), or null. */
  settingsProblem?(s: ModelSettings): { field: string; message: string } | null
}

export type ProviderStatus = Static<typeof ProviderStatusSchema>

/** Resolves `provider:model` strings to a configured client. */
export interface ProviderRegistry {
  /** Throws `INVALID_REQUEST` for an unknown provider, `PROVIDER_NOT_CONFIGURED` for one without credentials. */
  resolve(model: string): { client: LlmClient; model: string }
  status(): ProviderStatus[]
  defaultModel(): string
}
