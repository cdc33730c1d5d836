import { randomFillSync } from 'node:crypto'
import type { Span, SpanAttribute, SpanKind, TraceContext, Tracer } from '../core/tracing.js'
import type { SamplerName } from './trace-settings.js'

/**
 * Spans of our own behind the tracing seam (`core/tracing.ts`): a span is a plain record — ids,
 * name, kind, two clock readings, an attribute object, a status — handed to the exporter when it
 * ends. The OpenTelemetry SDK's spans cost a turn's three spans ~50 µs of bookkeeping each time
 * (context objects, attribute validation, high-resolution time tuples); these cost a few.
 * Ids are random (from a pooled `randomFillSync` buffer), timestamps wall-clock (the process'
 * time origin plus the monotonic clock, as the SDK reads them).
 */

/** A span that ended, as the exporter reads it. */
export interface EndedSpan {
  readonly context: TraceContext
  readonly parentSpanId: string | undefined
  readonly name: string
  readonly kind: SpanKind
  /** Milliseconds since the Unix epoch, fractional. */
  readonly startMs: number
  readonly endMs: number
  readonly attributes: Readonly<Record<string, SpanAttribute>>
  /** 2 (ERROR) when failed, else 0 (UNSET). */
  readonly status: 0 | 2
  readonly statusMessage: string | undefined
}

/** Random lowercase hex ids, never all zero (W3C: an all-zero id is invalid). */
class Ids {
  private readonly pool = Buffer.alloc(4096)
  private at = this.pool.length

  hex(bytes: number): string {
    for (;;) {
      if (this.at + bytes > this.pool.length) {
        randomFillSync(this.pool)
        this.at = 0
      }
      const from = this.at
      this.at += bytes
      for (let i = from; i < this.at; i++) if (this.pool[i] !== 0) return this.pool.toString('hex', from, this.at)
    }
  }
}

/** Wall-clock milliseconds, sub-millisecond resolution. */
const now = (): number => performance.timeOrigin + performance.now()

/** A recording span: attributes and status are kept until it ends, then it goes to `ended` once. */
class RecordedSpan implements Span, EndedSpan {
  readonly startMs = now()
  endMs = 0
  readonly attributes: Record<string, SpanAttribute> = {}
  status: 0 | 2 = 0
  statusMessage: string | undefined = undefined

  constructor(
    readonly context: TraceContext,
    readonly parentSpanId: string | undefined,
    readonly name: string,
    readonly kind: SpanKind,
    private readonly ended: (span: EndedSpan) => void,
  ) {}

  set(key: string, value: SpanAttribute): void {
    if (this.endMs === 0) this.attributes[key] = value
  }

  fail(code: string, message?: string): void {
    if (this.endMs !== 0) return
    this.attributes['error.type'] = code
    this.status = 2
    this.statusMessage = message ?? code
  }

  end(): void {
    if (this.endMs !== 0) return
    this.endMs = now()
    this.ended(this)
  }
}

/** A span the sampler did not pick: it has an identity for children and outgoing calls (unsampled), records nothing. */
class UnsampledSpan implements Span {
  constructor(readonly context: TraceContext) {}
  set(): void {}
  fail(): void {}
  end(): void {}
}

/**
 * The tracer: each span is a child of the given context (a new trace without one), sampled as
 * `sampler` says — the parent-based samplers follow the parent's sampled flag, the ratio samplers
 * decide by the trace id as the OpenTelemetry SDKs do, so every service of a trace agrees.
 */
export function recordingTracer(sampler: SamplerName, ratio: number, ended: (span: EndedSpan) => void): Tracer {
  const ids = new Ids()
  const r = Math.max(0, Math.min(1, ratio))
  const bound = r === 1 ? 0x100000000 : Math.floor(r * 0xffffffff)
  const root = sampler.endsWith('always_on')
    ? () => true
    : sampler.endsWith('always_off')
      ? () => false
      : (traceId: string) => byRatio(traceId, bound)
  const parentBased = sampler.startsWith('parentbased_')
  return {
    enabled: true,
    start(name, parent, kind = 'internal') {
      const traceId = parent?.traceId ?? ids.hex(16)
      const sampled = parent && parentBased ? (parent.flags & 1) === 1 : root(traceId)
      const context: TraceContext = {
        traceId,
        spanId: ids.hex(8),
        flags: sampled ? 1 : 0,
        ...(parent?.state ? { state: parent.state } : {}),
      }
      return sampled ? new RecordedSpan(context, parent?.spanId, name, kind, ended) : new UnsampledSpan(context)
    },
  }
}

/** The OpenTelemetry JS SDK's TraceIdRatioBased decision: the trace id's four 32-bit words XORed, below ratio × (2^32 − 1) (2^32 at ratio 1). */
function byRatio(traceId: string, bound: number): boolean {
  let acc = 0
  for (let i = 0; i < 32; i += 8) acc = (acc ^ parseInt(traceId.slice(i, i + 8), 16)) >>> 0
  return acc < bound
}
