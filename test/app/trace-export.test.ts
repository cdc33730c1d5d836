// Burrow's own spans and OTLP/HTTP JSON exporter (src/app/trace-spans.ts, trace-export.ts):
// sampling, ids, the span record, batching and the queue bound, the JSON document as a real
// receiver on loopback reads it, and failed exports.
import t from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Logger } from '../../src/core/logger.js'
import type { TraceContext } from '../../src/core/tracing.js'
import { OtlpJsonExporter, nanos } from '../../src/app/trace-export.js'
import { DEFAULT_BATCH, type BatchSettings } from '../../src/app/trace-settings.js'
import { recordingTracer, type EndedSpan } from '../../src/app/trace-spans.js'
import { startOtlpCollector } from '../helpers/otlp-collector.js'

const parent = (flags: number, state?: string): TraceContext => ({
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  spanId: '00f067aa0ba902b7',
  flags,
  ...(state ? { state } : {}),
})

function warnings(): { logger: Logger; warned: Array<Record<string, unknown>> } {
  const warned: Array<Record<string, unknown>> = []
  const logger: Logger = {
    debug() {},
    info() {},
    error() {},
    warn: (obj, msg) => warned.push({ ...obj, msg }),
    child: () => logger,
  }
  return { logger, warned }
}

t.test('spans: ids, parents, trace state, and a record handed over once when it ends', async (t) => {
  const ended: EndedSpan[] = []
  const tracer = recordingTracer('parentbased_always_on', 1, (s) => ended.push(s))
  const root = tracer.start('root', undefined, 'server')
  t.match(root.context, { traceId: /^[0-9a-f]{32}$/, spanId: /^[0-9a-f]{16}$/, flags: 1 })
  const child = tracer.start('child', root.context, 'client')
  t.equal(child.context!.traceId, root.context!.traceId, 'a child stays in its trace')
  t.not(child.context!.spanId, root.context!.spanId)
  const remote = tracer.start('remote child', parent(1, 'vendor=1'))
  t.same(remote.context, { traceId: parent(1).traceId, spanId: remote.context!.spanId, flags: 1, state: 'vendor=1' })

  child.set('n', 3)
  child.fail('PROVIDER_ERROR', 'the provider answered 502')
  child.end()
  child.end()
  child.set('late', 'ignored')
  t.equal(ended.length, 1, 'ended once')
  t.match(ended[0], {
    name: 'child',
    kind: 'client',
    parentSpanId: root.context!.spanId,
    attributes: { n: 3, 'error.type': 'PROVIDER_ERROR' },
    status: 2,
    statusMessage: 'the provider answered 502',
  })
  t.notOk('late' in ended[0]!.attributes)
  t.ok(ended[0]!.endMs >= ended[0]!.startMs && Math.abs(ended[0]!.startMs - Date.now()) < 5_000, 'wall-clock times')
  root.end()
  t.equal(ended[1]!.parentSpanId, undefined, 'a root span has no parent')
  const ids = new Set(Array.from({ length: 1000 }, () => tracer.start('x', undefined).context!.spanId))
  t.equal(ids.size, 1000, 'span ids do not repeat')
})

t.test('sampling: the parent-based samplers follow the caller; an unsampled span still has a context', async (t) => {
  const ended: EndedSpan[] = []
  const on = recordingTracer('parentbased_always_on', 1, (s) => ended.push(s))
  const unsampled = on.start('x', parent(0))
  t.same(unsampled.context, { traceId: parent(0).traceId, spanId: unsampled.context!.spanId, flags: 0 }, 'the context flows, unsampled')
  t.not(unsampled.context!.spanId, parent(0).spanId)
  const grandchild = on.start('y', unsampled.context)
  unsampled.end()
  grandchild.end()
  t.equal(ended.length, 0, 'nothing recorded under an unsampled caller')
  on.start('z', parent(1)).end()
  t.equal(ended.length, 1)

  const off = recordingTracer('parentbased_always_off', 1, (s) => ended.push(s))
  off.start('root', undefined).end()
  off.start('child of sampled', parent(1)).end()
  t.equal(ended.length, 2, 'parentbased_always_off: roots unsampled, sampled callers followed')

  const always = recordingTracer('always_on', 1, (s) => ended.push(s))
  always.start('ignores the flag', parent(0)).end()
  t.equal(ended.length, 3)
  const never = recordingTracer('always_off', 1, (s) => ended.push(s))
  const n = never.start('never', parent(1))
  n.end()
  t.equal(ended.length, 3)
  t.equal(n.context!.flags, 0)
})

t.test('traceidratio decides as the OpenTelemetry JS SDK does, and samples about its share', async (t) => {
  // Decisions of the SDK's TraceIdRatioBasedSampler (sdk-trace-base 2.12) at ratio 0.25 for these ids.
  const ids = [
    '4bf92f3577b34da6a3ce929d0e0e4736',
    '0af7651916cd43dd8448eb211c80319c',
    '80000000000000000000000000000000',
    '7fffffff000000000000000000000000',
    '12345678123456781234567812345678',
    'ffffffffffffffffffffffffffffff00',
    '00000000000000000000000000000001',
    '3ce929d00e0e47364bf92f3577b34da6',
  ]
  const sdk = [false, false, false, false, true, true, true, true]
  const ratio = recordingTracer('traceidratio', 0.25, () => {})
  t.same(
    ids.map((traceId) => ratio.start('x', { traceId, spanId: '00f067aa0ba902b7', flags: 1 }).context!.flags === 1),
    sdk,
  )
  let sampled = 0
  for (let i = 0; i < 4000; i++) sampled += ratio.start('root', undefined).context!.flags
  t.ok(sampled > 800 && sampled < 1200, `about a quarter of new traces (${sampled} of 4000)`)
  const all = recordingTracer('traceidratio', 1, () => {})
  t.equal(all.start('x', { traceId: 'ffffffffffffffffffffffffffffffff', spanId: '00f067aa0ba902b7', flags: 0 }).context!.flags, 1)
  const none = recordingTracer('parentbased_traceidratio', 0, () => {})
  t.equal(none.start('x', undefined).context!.flags, 0)
  t.equal(none.start('x', parent(1)).context!.flags, 1, 'a sampled caller is followed')
})

t.test('export: the OTLP/HTTP JSON document as a receiver reads it, every attribute type', async (t) => {
  const collector = await startOtlpCollector()
  t.teardown(() => collector.close())
  const { logger, warned } = warnings()
  const exporter = new OtlpJsonExporter(
    `${collector.url}/v1/traces`,
    { 'x-api-key': 'k' },
    { 'service.name': 'svc', 'service.version': '1.2.3' },
    { name: 'burrow', version: '1.2.3' },
    DEFAULT_BATCH,
    logger,
  )
  const tracer = recordingTracer('parentbased_always_on', 1, exporter.add)
  const request = tracer.start('POST /v1/sessions/{id}/turns', parent(1, 'vendor=1'), 'server')
  const llm = tracer.start('chat "quoted" \u00e9\n', request.context, 'client')
  llm.set('s', 'text with "quotes" and \\ and \u2028')
  llm.set('i', 42)
  llm.set('d', 0.5)
  llm.set('b', false)
  llm.set('a', ['end_turn', 'x"y'])
  llm.set('nan', Number.NaN)
  llm.fail('PROVIDER_TIMEOUT')
  llm.end()
  // Past the batch's first 64 KB, in characters of two and three UTF-8 bytes.
  const big = tracer.start('big', request.context)
  big.set('text', '\u00e9\u20ac'.repeat(40_000))
  big.end()
  request.end()
  await exporter.shutdown()
  t.equal(warned.length, 0)
  t.equal(collector.requests.length, 1, 'one batch')
  t.equal(collector.requests[0]!.headers['x-api-key'], 'k', 'the configured headers go with it')
  t.equal(collector.spans.length, 3)
  const [l, b, r] = collector.spans
  t.equal(b!.attributes.text, '\u00e9\u20ac'.repeat(40_000), 'a span larger than the batch buffer')
  t.same(l!.resource, { 'service.name': 'svc', 'service.version': '1.2.3' })
  t.match(l, {
    traceId: parent(1).traceId,
    parentSpanId: request.context!.spanId,
    name: 'chat "quoted" \u00e9\n',
    kind: 3,
    attributes: {
      s: 'text with "quotes" and \\ and \u2028',
      i: 42,
      d: 0.5,
      b: false,
      a: ['end_turn', 'x"y'],
      'error.type': 'PROVIDER_TIMEOUT',
    },
    status: { code: 2, message: 'PROVIDER_TIMEOUT' },
  })
  t.equal(l!.attributes.nan, 'NaN', 'NaN as the protobuf JSON mapping spells it')
  t.match(r, { spanId: request.context!.spanId, parentSpanId: parent(1).spanId, kind: 2, status: { code: 0 } })
  t.same(l!.scope, { name: 'burrow', version: '1.2.3' })
  t.equal(nanos(1_700_000_000_123.5), '1700000000123500000')
  t.equal(nanos(1_700_000_000_999.9999999), '1700000001000000000', 'rounding carries into the milliseconds')
})

t.test('batching: a full batch goes at once, a partial one after the delay; the queue is bounded', async (t) => {
  const collector = await startOtlpCollector()
  t.teardown(() => collector.close())
  const { logger, warned } = warnings()
  const make = (batch: BatchSettings) =>
    new OtlpJsonExporter(`${collector.url}/v1/traces`, {}, { 'service.name': 's' }, { name: 'b', version: '0' }, batch, logger)
  const tracer = (e: OtlpJsonExporter) => recordingTracer('always_on', 1, e.add)

  // A batch of 2 leaves at once; while it is in flight the queue (4) fills and the rest is dropped.
  const bounded = make({ scheduleDelayMs: 60_000, exportTimeoutMs: 5_000, maxQueueSize: 4, maxExportBatchSize: 2 })
  const tb = tracer(bounded)
  for (let i = 0; i < 8; i++) tb.start(`s${i}`, undefined).end()
  await bounded.shutdown()
  t.same(
    collector.spans.map((s) => s.name),
    ['s0', 's1', 's2', 's3', 's4', 's5'],
    'in order; the two beyond the queue are dropped',
  )
  t.same(
    collector.requests.map(() => 'POST'),
    ['POST', 'POST', 'POST'],
    'batches of two',
  )
  t.equal(warned.length, 1, 'the first drop is reported at once, the next within the minute is not')
  t.match(warned[0], { dropped_spans: 1, queue: 4, msg: /falls behind/ })
  t.same(bounded.lost, { queue_full: 2, export_failed: 0 }, 'counted: burrow_trace_spans_dropped_total')
  tb.start('after shutdown', undefined).end()

  // One span and a short delay: exported without a shutdown.
  const timed = make({ ...DEFAULT_BATCH, scheduleDelayMs: 50 })
  tracer(timed).start('alone', undefined).end()
  const t0 = Date.now()
  while (!collector.spans.some((s) => s.name === 'alone') && Date.now() - t0 < 5_000) await new Promise((r) => setTimeout(r, 10))
  t.ok(
    collector.spans.some((s) => s.name === 'alone'),
    'sent after the schedule delay',
  )
  await timed.shutdown()
  t.notOk(
    collector.spans.some((s) => s.name === 'after shutdown'),
    'a closed exporter takes nothing',
  )
})

t.test('a collector that refuses exports: logged once with the count, never thrown', async (t) => {
  let posts = 0
  const server = createServer((req, res) => {
    posts++
    req.resume()
    req.on('end', () => res.writeHead(503).end())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const { logger, warned } = warnings()
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`
  const exporter = new OtlpJsonExporter(url, {}, {}, { name: 'b', version: '0' }, { ...DEFAULT_BATCH, maxExportBatchSize: 1 }, logger)
  const tracer = recordingTracer('always_on', 1, exporter.add)
  for (let i = 0; i < 3; i++) tracer.start(`s${i}`, undefined).end()
  await exporter.shutdown()
  t.equal(posts, 3, 'every batch was tried')
  t.equal(warned.length, 1, 'one warning within the minute')
  t.match(warned[0], { spans: 1, failed_exports: 1, endpoint: url, msg: /exporting spans failed/ })
  t.match(String((warned[0]!.err as Error).message), /503/)
  t.same(exporter.lost, { queue_full: 0, export_failed: 3 }, 'every span of the refused batches counted')
})
