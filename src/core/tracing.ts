import { toBurrowError } from './errors.js'

/**
 * Tracing seam: the service opens spans; the app decides whether they go anywhere. With
 * tracing off the tracer is {@link NO_TRACING}: `start` returns one shared no-op span and
 * allocates nothing, and no tracing library is loaded (docs/observability.md).
 */

/** A span's W3C identity (trace context): what a child is parented to and what `traceparent` carries. */
export interface TraceContext {
  /** 32 lowercase hex digits, not all zero. */
  readonly traceId: string
  /** 16 lowercase hex digits, not all zero. */
  readonly spanId: string
  /** W3C trace flags; bit 0 is `sampled`. */
  readonly flags: number
  /** The vendor `tracestate` header, passed on unchanged. */
  readonly state?: string | undefined
}

export type SpanAttribute = string | number | boolean | readonly string[]

export type SpanKind = 'internal' | 'server' | 'client'

export interface Span {
  /** This span's identity, for children and outgoing calls; undefined for the no-op span. */
  readonly context: TraceContext | undefined
  set(key: string, value: SpanAttribute): void
  /** Marks the span failed (status ERROR) with the error's table code and message. */
  fail(code: string, message?: string): void
  /** Ends the span; later calls do nothing. */
  end(): void
}

export interface Tracer {
  /** False when tracing is off: callers may skip work that only feeds spans. */
  readonly enabled: boolean
  /** Starts a span as a child of `parent` (a new trace when undefined). */
  start(name: string, parent: TraceContext | undefined, kind?: SpanKind): Span
}

export const NOOP_SPAN: Span = {
  context: undefined,
  set() {},
  fail() {},
  end() {},
}

/**
 * Runs `work` as `span`'s work: a failure marks the span failed with the error's table code (and is
 * rethrown), and the span ends either way.
 */
export async function withinSpan<T>(span: Span, work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (err) {
    const e = toBurrowError(err)
    span.fail(e.code, e.message)
    throw err
  } finally {
    span.end()
  }
}

export const NO_TRACING: Tracer = {
  enabled: false,
  start: () => NOOP_SPAN,
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/
const ZERO_TRACE = '0'.repeat(32)
const ZERO_SPAN = '0'.repeat(16)

/**
 * Reads a W3C `traceparent` header (and `tracestate`); undefined for a missing or invalid one,
 * which then starts a new trace as the Trace Context recommendation says. Version `ff` is
 * invalid; a later version is read by its first four fields.
 */
export function parseTraceparent(header: unknown, state?: unknown): TraceContext | undefined {
  if (typeof header !== 'string') return undefined
  const m = TRACEPARENT.exec(header.trim())
  if (!m) return undefined
  const [, version, traceId, spanId, flags, rest] = m
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined
  return {
    traceId: traceId!,
    spanId: spanId!,
    flags: parseInt(flags!, 16),
    ...(typeof state === 'string' && state.length > 0 ? { state } : {}),
  }
}

/** The `traceparent` header naming `ctx` as the parent of the receiver's work. */
export function formatTraceparent(ctx: TraceContext): string {
  return `00-${ctx.traceId}-${ctx.spanId}-${(ctx.flags & 0xff).toString(16).padStart(2, '0')}`
}

/** Adds `traceparent` (and `tracestate`) for `ctx` to outgoing request headers. */
export function injectTrace(ctx: TraceContext | undefined, headers: Record<string, string>): void {
  if (!ctx) return
  headers.traceparent = formatTraceparent(ctx)
  if (ctx.state) headers.tracestate = ctx.state
}
