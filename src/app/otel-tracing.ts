import type { Logger } from '../core/logger.js'
import type { Tracer } from '../core/tracing.js'
import type { TracingConfig } from './config.js'
import { OtlpJsonExporter } from './trace-export.js'
import { recordingTracer } from './trace-spans.js'

/** Tracing on: the tracer, and the flush that shutdown awaits. */
export interface OtelTracing {
  tracer: Tracer
  /** Spans lost since start, by reason (`burrow_trace_spans_dropped_total`). */
  dropped(): Readonly<Record<'queue_full' | 'export_failed', number>>
  /** Exports what is buffered and stops; resolves within `timeoutMs` whatever the collector does, never rejects. */
  shutdown(timeoutMs: number): Promise<void>
}

/**
 * OpenTelemetry tracing behind the tracing seam, loaded only when an OTLP endpoint is configured
 * (app/burrow.ts imports this module dynamically): spans of our own (`trace-spans.ts`), sampled as
 * `OTEL_TRACES_SAMPLER` says, batched and sent as OTLP/HTTP JSON (`trace-export.ts`) with the
 * resource's `service.name` and `service.version`. Nothing is process-global, so several services
 * may share a process.
 */
export function openTelemetryTracing(config: TracingConfig, opts: { logger: Logger; version: string }): OtelTracing {
  const exporter = new OtlpJsonExporter(
    config.url,
    config.headers,
    { 'service.name': config.serviceName, 'service.version': opts.version },
    { name: 'burrow', version: opts.version },
    config.batch,
    opts.logger,
  )
  const tracer = recordingTracer(config.sampler, config.samplerRatio, exporter.add)
  let stopped: Promise<void> | null = null
  return {
    tracer,
    dropped: () => exporter.lost,
    shutdown(timeoutMs) {
      stopped ??= (async () => {
        let timer: NodeJS.Timeout | undefined
        const late = new Promise<'late'>((resolve) => {
          timer = setTimeout(() => resolve('late'), timeoutMs)
          timer.unref()
        })
        if ((await Promise.race([exporter.shutdown().then(() => 'flushed' as const), late])) === 'late')
          opts.logger.warn(
            { endpoint: config.url, ms: timeoutMs },
            'the trace collector did not take the last spans in time; they are dropped',
          )
        clearTimeout(timer)
      })()
      return stopped
    },
  }
}
