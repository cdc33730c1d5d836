import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client'
import type { Telemetry } from '../core/telemetry.js'
import type { RestMetrics } from '../surfaces/rest/rest-api.js'
import { FastCounter, FastHistogram } from './fast-metrics.js'

/** USD per million tokens, input and output, by `provider:model` (`BURROW_MODEL_PRICES`). */
export type ModelPrices = ReadonlyMap<string, { input: number; output: number }>

const LATENCY_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120]

/** Distinct models counted under their own name in the LLM token counters; more count as `_other`. */
export const MAX_MODEL_LABELS = 100
const OTHER_MODEL = '_other'

/** Prometheus metrics (prom-client registry), one registry per app instance so several can share a process. */
export class Metrics implements Telemetry, RestMetrics {
  readonly registry = new Registry()
  readonly contentType: string
  private readonly httpRequests: FastCounter
  private readonly httpDuration: FastHistogram
  private readonly turns: FastCounter
  private readonly turnDuration: FastHistogram
  private readonly providerDuration: FastHistogram
  private readonly sseStreams: Gauge
  private readonly llmTokens: FastCounter
  private readonly llmCost: FastCounter
  private readonly prices: ModelPrices
  private readonly modelsSeen = new Set<string>()

  constructor(opts: { defaultMetrics?: boolean; prices?: ModelPrices } = {}) {
    this.prices = opts.prices ?? new Map()
    const r = this.registry
    this.contentType = r.contentType
    if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: r, prefix: 'burrow_' })
    this.httpRequests = new FastCounter('burrow_http_requests_total', 'HTTP requests by route and status.', [
      'method',
      'route',
      'status',
    ]).register(r)
    this.httpDuration = new FastHistogram(
      'burrow_http_request_duration_seconds',
      'HTTP request latency.',
      ['method', 'route'],
      [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
    ).register(r)
    this.turns = new FastCounter('burrow_turns_total', 'Turns ended, by status.', ['status']).register(r)
    this.turnDuration = new FastHistogram(
      'burrow_turn_duration_seconds',
      'Turn latency (start to end or pause).',
      ['status'],
      LATENCY_BUCKETS,
    ).register(r)
    this.providerDuration = new FastHistogram(
      'burrow_provider_request_duration_seconds',
      'LLM provider call latency, by provider and outcome.',
      ['provider', 'outcome'],
      LATENCY_BUCKETS,
    ).register(r)
    this.llmTokens = new FastCounter('burrow_llm_tokens_total', 'LLM tokens (turns and compactions), by model and type.', [
      'provider',
      'model',
      'type',
    ]).register(r)
    this.llmCost = new FastCounter(
      'burrow_llm_cost_usd_total',
      'Estimated LLM cost in US dollars, by model, from BURROW_MODEL_PRICES (models without a price are not counted).',
      ['provider', 'model'],
    ).register(r)
    this.sseStreams = new Gauge({ name: 'burrow_sse_streams_active', help: 'Open SSE streams.', registers: [r] })
  }

  observeHttp(method: string, route: string, status: number, seconds: number): void {
    this.httpRequests.inc([method, route, String(status)])
    this.httpDuration.observe([method, route], seconds)
  }

  turnEnded(status: 'completed' | 'requires_action' | 'failed', seconds: number): void {
    this.turns.inc([status])
    this.turnDuration.observe([status], seconds)
  }

  providerCall(provider: string, outcome: string, seconds: number): void {
    this.providerDuration.observe([provider, outcome], seconds)
  }

  llmUsage(provider: string, modelName: string, inputTokens: number, outputTokens: number): void {
    const model = this.modelLabel(provider, modelName)
    this.llmTokens.inc([provider, model, 'input'], inputTokens)
    this.llmTokens.inc([provider, model, 'output'], outputTokens)
    const price = this.prices.get(`${provider}:${modelName}`)
    if (price) this.llmCost.inc([provider, model], (inputTokens * price.input + outputTokens * price.output) / 1_000_000)
  }

  /**
   * A model's label: its name, for the first {@link MAX_MODEL_LABELS} models that answered; `_other`
   * after that. Model names come from clients (any name the offline provider or an OpenAI-compatible
   * server takes), and every distinct name would otherwise be new series kept for the life of the
   * process. Priced models always keep their name.
   */
  private modelLabel(provider: string, model: string): string {
    const key = `${provider}:${model}`
    if (this.modelsSeen.has(key) || this.prices.has(key)) return model
    if (this.modelsSeen.size >= MAX_MODEL_LABELS) return OTHER_MODEL
    this.modelsSeen.add(key)
    return model
  }

  streamOpened(): void {
    this.sseStreams.inc()
  }
  streamClosed(): void {
    this.sseStreams.dec()
  }
  sseOpened(): void {
    this.streamOpened()
  }
  sseClosed(): void {
    this.streamClosed()
  }

  /** A gauge read when /metrics is scraped. */
  watch(name: string, help: string, read: () => number): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(read())
      },
    })
  }

  /** A counter with one label, its values read when /metrics is scraped (they only grow). */
  watchCounter(name: string, help: string, label: string, read: () => Readonly<Record<string, number>>): void {
    new Counter({
      name,
      help,
      labelNames: [label],
      registers: [this.registry],
      collect() {
        this.reset()
        for (const [value, n] of Object.entries(read())) this.inc({ [label]: value }, n)
      },
    })
  }

  text(): Promise<string> {
    return this.registry.metrics()
  }
}
