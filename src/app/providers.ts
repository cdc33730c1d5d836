import type { LlmClient, ProviderRegistry } from '../core/llm.js'
import { NO_TELEMETRY, type Telemetry } from '../core/telemetry.js'
import { NO_TRACING, type Tracer } from '../core/tracing.js'
import { InstrumentedLlmClient } from '../providers/instrumented-llm-client.js'
import { AnthropicProvider } from '../providers/anthropic-provider.js'
import { OfflineProvider } from '../providers/offline-provider.js'
import { OpenAiProvider } from '../providers/openai-provider.js'
import { ProviderHttp } from '../providers/provider-http.js'
import { StaticProviderRegistry } from '../providers/provider-registry.js'
import { ConfigError, type Config } from './config.js'

export const DEFAULT_MODELS = { anthropic: 'anthropic:claude-sonnet-4-5', openai: 'openai:gpt-4o-mini', offline: 'offline:echo' } as const

/**
 * Builds the provider registry over one shared undici dispatcher. Every client is instrumented:
 * its calls count tokens (and cost) and, with tracing on, run in LLM-call spans.
 */
export function buildProviders(
  config: Config,
  observe: { tracer: Tracer; telemetry: Telemetry } = { tracer: NO_TRACING, telemetry: NO_TELEMETRY },
): { registry: ProviderRegistry; http: ProviderHttp } {
  const http = new ProviderHttp(config.provider)
  const instrument = (c: LlmClient | null): LlmClient | null =>
    c === null ? null : new InstrumentedLlmClient(c, observe.tracer, observe.telemetry)
  const anthropic = config.anthropic.apiKey
    ? new AnthropicProvider(http, {
        baseUrl: config.anthropic.baseUrl,
        apiKey: config.anthropic.apiKey,
        defaultModel: DEFAULT_MODELS.anthropic,
      })
    : null
  const openai = config.openai.configured
    ? new OpenAiProvider(http, { baseUrl: config.openai.baseUrl, apiKey: config.openai.apiKey, defaultModel: DEFAULT_MODELS.openai })
    : null
  const fallback = config.defaultModel ?? (anthropic ? DEFAULT_MODELS.anthropic : openai ? DEFAULT_MODELS.openai : DEFAULT_MODELS.offline)
  const registry = new StaticProviderRegistry(
    [
      { name: 'anthropic', client: instrument(anthropic), hint: 'set ANTHROPIC_API_KEY', defaultModel: DEFAULT_MODELS.anthropic },
      {
        name: 'openai',
        client: instrument(openai),
        hint: 'set OPENAI_API_KEY, or OPENAI_BASE_URL for a keyless compatible server',
        defaultModel: DEFAULT_MODELS.openai,
      },
      { name: 'offline', client: instrument(new OfflineProvider()), hint: 'always available', defaultModel: DEFAULT_MODELS.offline },
    ],
    fallback,
  )
  try {
    registry.resolve(fallback)
  } catch (err) {
    throw new ConfigError([`BURROW_DEFAULT_MODEL '${fallback}' cannot be used: ${(err as Error).message}`])
  }
  return { registry, http }
}
