import { Agent, request } from 'undici'
import type { Logger } from '../core/logger.js'
import type { SpanAttribute } from '../core/tracing.js'
import type { BatchSettings } from './trace-settings.js'
import type { EndedSpan } from './trace-spans.js'

/** Between two warnings about failed exports (a dead collector fails every batch). */
const EXPORT_WARNING_INTERVAL_MS = 60_000

const KIND = { internal: 1, server: 2, client: 3 } as const

/** A batch being filled: its spans' JSON, comma-separated, as UTF-8 bytes. */
interface Batch {
  bytes: Buffer
  length: number
  spans: number
}

/**
 * Ended spans, batched and POSTed as OTLP/HTTP JSON (`ExportTraceServiceRequest`) — what the
 * SDK's batch span processor and JSON exporter do, written for the spans of `trace-spans.ts`. A
 * span is written into its batch's bytes the moment it ends, so nothing of it stays on the heap
 * while the batch waits (the garbage collector would copy every waiting span otherwise). A full
 * batch (`maxExportBatchSize`) is sent at once, a partial one after `scheduleDelayMs`, one export
 * in flight at a time; spans beyond `maxQueueSize` are dropped while the collector is slow.
 * Failures and drops are logged (the first at once, then at most one warning a minute with the count),
 * never thrown: the collector's state never reaches a request or shutdown.
 */
export class OtlpJsonExporter {
  private current: Batch | null = null
  private readonly full: Batch[] = []
  /** Spans in `current` and `full`. */
  private queued = 0
  private timer: NodeJS.Timeout | undefined
  private inFlight: Promise<void> | undefined
  private closed = false
  private readonly agent = new Agent({ keepAliveTimeout: 10_000 })
  private readonly head: Buffer
  private failures = 0
  private dropped = 0
  /** Spans lost since start, by why: the queue was full (a slow collector), or their export failed. */
  readonly lost = { queue_full: 0, export_failed: 0 }
  private readonly failureWarning = onceAMinute()
  private readonly dropWarning = onceAMinute()

  constructor(
    private readonly url: string,
    private readonly headers: Record<string, string>,
    resource: Record<string, string>,
    scope: { name: string; version: string },
    private readonly batch: BatchSettings,
    private readonly logger: Logger,
  ) {
    this.head = Buffer.from(
      `{"resourceSpans":[{"resource":{"attributes":${attributes(resource)}},` +
        `"scopeSpans":[{"scope":{"name":${JSON.stringify(scope.name)},"version":${JSON.stringify(scope.version)}},"spans":[`,
    )
  }

  /** Queues an ended span (the tracer's `ended` callback). */
  readonly add = (span: EndedSpan): void => {
    if (this.closed) return
    if (this.queued >= this.batch.maxQueueSize) {
      this.dropped++
      this.lost.queue_full++
      this.droppedWarning()
      return
    }
    const json = spanJson(span)
    const b = (this.current ??= { bytes: Buffer.allocUnsafe(64 * 1024), length: 0, spans: 0 })
    // At most three bytes per UTF-16 unit, and the comma.
    if (b.length + json.length * 3 + 1 > b.bytes.length) {
      const grown = Buffer.allocUnsafe(Math.max(b.bytes.length * 2, b.length + json.length * 3 + 1))
      b.bytes.copy(grown, 0, 0, b.length)
      b.bytes = grown
    }
    if (b.spans > 0) b.bytes[b.length++] = 0x2c
    b.length += b.bytes.write(json, b.length)
    b.spans++
    this.queued++
    if (b.spans >= this.batch.maxExportBatchSize) {
      this.full.push(b)
      this.current = null
      this.next()
    } else this.timer ??= setTimeout(() => this.next(true), this.batch.scheduleDelayMs).unref()
  }

  /** Sends everything queued, then stops taking spans; never rejects. */
  async shutdown(): Promise<void> {
    this.closed = true
    clearTimeout(this.timer)
    this.timer = undefined
    while (this.inFlight || this.queued > 0) {
      this.next(true)
      await this.inFlight
    }
    await this.agent.close().catch(() => {})
  }

  /** Starts the next export unless one is in flight; `partial`: the batch being filled may go too. */
  private next(partial = false): void {
    clearTimeout(this.timer)
    this.timer = undefined
    if (this.inFlight) return
    if (this.full.length === 0 && partial && this.current) {
      this.full.push(this.current)
      this.current = null
    }
    const b = this.full.shift()
    if (!b) return
    // As the batch span processor: a batch on its way no longer counts against the queue.
    this.queued -= b.spans
    this.inFlight = this.send(b).then(() => {
      this.inFlight = undefined
      if (this.closed) return
      if (this.full.length > 0) this.next()
      else if (this.current) this.timer ??= setTimeout(() => this.next(true), this.batch.scheduleDelayMs).unref()
    })
  }

  private async send(b: Batch): Promise<void> {
    try {
      const res = await request(this.url, {
        method: 'POST',
        dispatcher: this.agent,
        headers: { ...this.headers, 'content-type': 'application/json' },
        body: Buffer.concat([this.head, b.bytes.subarray(0, b.length), TAIL]),
        signal: AbortSignal.timeout(this.batch.exportTimeoutMs),
      })
      await res.body.dump()
      if (res.statusCode < 200 || res.statusCode > 299) throw new Error(`the collector answered ${res.statusCode}`)
    } catch (err) {
      this.failed(b.spans, err)
    }
  }

  private failed(spans: number, err: unknown): void {
    this.failures++
    this.lost.export_failed += spans
    if (!this.failureWarning()) return
    this.logger.warn(
      { err, endpoint: this.url, spans, failed_exports: this.failures, dropped_spans: this.dropped },
      'exporting spans failed; they are dropped (tracing goes on, requests are not affected)',
    )
    this.failures = 0
    this.dropped = 0
  }

  /** A collector that answers, but slower than spans end: the drops are reported too (throttled like failures). */
  private droppedWarning(): void {
    if (!this.dropWarning()) return
    this.logger.warn(
      { endpoint: this.url, dropped_spans: this.dropped, queue: this.batch.maxQueueSize },
      'the trace collector falls behind: spans beyond the queue are dropped (OTEL_BSP_MAX_QUEUE_SIZE)',
    )
    this.dropped = 0
  }
}

const TAIL = Buffer.from(']}]}]}')

/** A gate for one kind of warning: true at the first call, then at most once per EXPORT_WARNING_INTERVAL_MS. */
function onceAMinute(): () => boolean {
  let last = -Infinity
  return () => {
    const now = performance.now()
    if (now - last < EXPORT_WARNING_INTERVAL_MS) return false
    last = now
    return true
  }
}

function spanJson(s: EndedSpan): string {
  const c = s.context
  let out = `{"traceId":"${c.traceId}","spanId":"${c.spanId}"`
  if (s.parentSpanId) out += `,"parentSpanId":"${s.parentSpanId}"`
  if (c.state) out += `,"traceState":${JSON.stringify(c.state)}`
  out +=
    `,"flags":${c.flags & 0xff},"name":${JSON.stringify(s.name)},"kind":${KIND[s.kind]}` +
    `,"startTimeUnixNano":"${nanos(s.startMs)}","endTimeUnixNano":"${nanos(s.endMs)}","attributes":${attributes(s.attributes)}`
  out += s.status === 2 ? `,"status":{"code":2,"message":${JSON.stringify(s.statusMessage ?? '')}}}` : `,"status":{"code":0}}`
  return out
}

function attributes(attrs: Readonly<Record<string, SpanAttribute>>): string {
  let out = '['
  for (const key in attrs) out += `${out.length === 1 ? '' : ','}{"key":${JSON.stringify(key)},"value":${value(attrs[key]!)}}`
  return out + ']'
}

/** An OTLP `AnyValue`: integers as intValue, other numbers as doubleValue (non-finite ones as the strings protobuf's JSON mapping names). */
function value(v: SpanAttribute): string {
  if (typeof v === 'string') return `{"stringValue":${JSON.stringify(v)}}`
  if (typeof v === 'boolean') return `{"boolValue":${v}}`
  if (typeof v === 'number') {
    if (Number.isSafeInteger(v)) return `{"intValue":${v}}`
    return Number.isFinite(v) ? `{"doubleValue":${v}}` : `{"doubleValue":"${Number.isNaN(v) ? 'NaN' : v > 0 ? 'Infinity' : '-Infinity'}"}`
  }
  let out = '{"arrayValue":{"values":['
  for (let i = 0; i < v.length; i++) out += `${i === 0 ? '' : ','}{"stringValue":${JSON.stringify(v[i])}}`
  return out + ']}}'
}

/** Milliseconds since the epoch as an integer count of nanoseconds, in decimal (past 2^53: no float can hold it). */
export function nanos(ms: number): string {
  let whole = Math.floor(ms)
  let frac = Math.round((ms - whole) * 1e6)
  if (frac >= 1e6) {
    whole++
    frac = 0
  }
  return whole === 0 ? String(frac) : `${whole}${String(frac).padStart(6, '0')}`
}
