import { ROOT_CONTEXT, SpanKind, SpanStatusCode, createTraceState, trace, type Context, type Span as OtelSpan } from '@opentelemetry/api'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { BasicTracerProvider, BatchSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base'
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions'
import type { Logger } from '../core/logger.js'
import type { Span, SpanAttribute, SpanKind as OurKind, TraceContext, Tracer } from '../core/tracing.js'
import type { TracingConfig } from './config.js'

/** Tracing on: the tracer, and the flush that shutdown awaits. */
export interface OtelTracing {
  tracer: Tracer
  /** Exports what is buffered and stops; resolves within `timeoutMs` whatever the collector does, never rejects. */
  shutdown(timeoutMs: number): Promise<void>
}

const KINDS: Record<OurKind, SpanKind> = { internal: SpanKind.INTERNAL, server: SpanKind.SERVER, client: SpanKind.CLIENT }

/** Between two warnings about failed exports (a dead collector fails every batch). */
const EXPORT_WARNING_INTERVAL_MS = 60_000

/**
 * The OpenTelemetry SDK behind the tracing seam, loaded only when an OTLP endpoint is configured
 * (app/burrow.ts imports this module dynamically). A provider of our own — never the global one —
 * so several services may share a process; a batch span processor so a span costs the request
 * only its creation; the OTLP/HTTP JSON exporter. Export failures are logged (throttled), never
 * thrown: the collector's state never reaches a request or shutdown.
 */
export function openTelemetryTracing(config: TracingConfig, opts: { logger: Logger; version: string }): OtelTracing {
  const exporter = new LoggedExporter(
    new OTLPTraceExporter({ url: config.url, headers: config.headers, timeoutMillis: 10_000 }),
    opts.logger,
    config.url,
  )
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: config.serviceName, [ATTR_SERVICE_VERSION]: opts.version }),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  })
  const otel = provider.getTracer('burrow', opts.version)
  const tracer: Tracer = {
    enabled: true,
    start(name, parent, kind = 'internal') {
      return new OtelSpanAdapter(otel.startSpan(name, { kind: KINDS[kind] }, parentContext(parent)))
    },
  }
  let stopped: Promise<void> | null = null
  return {
    tracer,
    shutdown(timeoutMs) {
      stopped ??= (async () => {
        let timer: NodeJS.Timeout | undefined
        const flushed = provider.shutdown().then(
          () => 'flushed' as const,
          (err: unknown) => {
            opts.logger.warn({ err, endpoint: config.url }, 'flushing the last spans failed')
            return 'failed' as const
          },
        )
        const late = new Promise<'late'>((resolve) => {
          timer = setTimeout(() => resolve('late'), timeoutMs)
          timer.unref()
        })
        if ((await Promise.race([flushed, late])) === 'late')
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

function parentContext(parent: TraceContext | undefined): Context {
  if (!parent) return ROOT_CONTEXT
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: parent.traceId,
    spanId: parent.spanId,
    traceFlags: parent.flags,
    // Whether the parent came over the wire changes nothing here: the default sampler follows its sampled flag either way.
    isRemote: true,
    ...(parent.state ? { traceState: createTraceState(parent.state) } : {}),
  })
}

class OtelSpanAdapter implements Span {
  readonly context: TraceContext

  constructor(private readonly span: OtelSpan) {
    const c = span.spanContext()
    const state = c.traceState?.serialize()
    this.context = { traceId: c.traceId, spanId: c.spanId, flags: c.traceFlags, ...(state ? { state } : {}) }
  }

  set(key: string, value: SpanAttribute): void {
    this.span.setAttribute(key, value as string | number | boolean | string[])
  }

  fail(code: string, message?: string): void {
    this.span.setAttribute('error.type', code)
    this.span.setStatus({ code: SpanStatusCode.ERROR, message: message ?? code })
  }

  end(): void {
    if (this.span.isRecording()) this.span.end()
  }
}

/** The exporter, with its failures logged: the first at once, then at most one warning a minute with the count. */
class LoggedExporter implements SpanExporter {
  private failures = 0
  private lastWarning = -Infinity

  constructor(
    private readonly inner: SpanExporter,
    private readonly logger: Logger,
    private readonly url: string,
  ) {}

  export(spans: ReadableSpan[], done: Parameters<SpanExporter['export']>[1]): void {
    this.inner.export(spans, (result) => {
      // 0 is ExportResultCode.SUCCESS (@opentelemetry/core, not a dependency of ours for one constant).
      if (result.code !== 0) this.failed(spans.length, result.error)
      done(result)
    })
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown()
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve()
  }

  private failed(spans: number, err: Error | undefined): void {
    this.failures++
    const now = performance.now()
    if (now - this.lastWarning < EXPORT_WARNING_INTERVAL_MS) return
    this.lastWarning = now
    this.logger.warn(
      { err, endpoint: this.url, spans, failed_exports: this.failures },
      'exporting spans failed; they are dropped (tracing goes on, requests are not affected)',
    )
    this.failures = 0
  }
}
