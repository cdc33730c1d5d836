import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { Telemetry } from '../core/telemetry.js'
import type { RestMetrics } from '../surfaces/rest/rest-api.js'

/** Prometheus metrics (prom-client), one registry per app instance so several can share a process. */
export class Metrics implements Telemetry, RestMetrics {
  readonly registry = new Registry()
  readonly contentType: string
  private readonly httpRequests: Counter<'method' | 'route' | 'status'>
  private readonly httpDuration: Histogram<'method' | 'route'>
  private readonly turns: Counter<'status'>
  private readonly turnDuration: Histogram<'status'>
  private readonly providerDuration: Histogram<'provider' | 'outcome'>
  private readonly sseStreams: Gauge

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry]
    this.contentType = this.registry.contentType
    if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'burrow_' })
    this.httpRequests = new Counter({ name: 'burrow_http_requests_total', help: 'HTTP requests by route and status.', labelNames: ['method', 'route', 'status'], registers })
    this.httpDuration = new Histogram({ name: 'burrow_http_request_duration_seconds', help: 'HTTP request latency.', labelNames: ['method', 'route'], registers, buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30] })
    this.turns = new Counter({ name: 'burrow_turns_total', help: 'Turns ended, by status.', labelNames: ['status'], registers })
    this.turnDuration = new Histogram({ name: 'burrow_turn_duration_seconds', help: 'Turn latency (start to end or pause).', labelNames: ['status'], registers, buckets: [0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120] })
    this.providerDuration = new Histogram({ name: 'burrow_provider_request_duration_seconds', help: 'LLM provider call latency, by provider and outcome.', labelNames: ['provider', 'outcome'], registers, buckets: [0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120] })
    this.sseStreams = new Gauge({ name: 'burrow_sse_streams_active', help: 'Open SSE streams.', registers })
  }

  observeHttp(method: string, route: string, status: number, seconds: number): void {
    this.httpRequests.inc({ method, route, status: String(status) })
    this.httpDuration.observe({ method, route }, seconds)
  }

  turnEnded(status: 'completed' | 'requires_action' | 'failed', seconds: number): void {
    this.turns.inc({ status })
    this.turnDuration.observe({ status }, seconds)
  }

  providerCall(provider: string, outcome: string, seconds: number): void {
    this.providerDuration.observe({ provider, outcome }, seconds)
  }

  streamOpened(): void { this.sseStreams.inc() }
  streamClosed(): void { this.sseStreams.dec() }
  sseOpened(): void { this.streamOpened() }
  sseClosed(): void { this.streamClosed() }

  text(): Promise<string> { return this.registry.metrics() }
}
