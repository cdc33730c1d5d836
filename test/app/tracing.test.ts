// OpenTelemetry traces end to end: the real service exports to a real OTLP/HTTP receiver on
// loopback, a fake LLM server speaks the OpenAI wire format, and the parent links are checked
// from the caller's traceparent down to the provider's HTTP request.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import { eventually, startBurrow } from '../helpers/harness.js'
import { startOtlpCollector, type CollectedSpan } from '../helpers/otlp-collector.js'

const MEM = { BURROW_SESSION_STORE: 'lmdb', BURROW_MEMORY_STORE: 'hnsw', BURROW_COMPACTION: 'on', BURROW_DURABILITY: 'relaxed' }
const hex = (bytes: number) => randomBytes(bytes).toString('hex')
const traceparent = (traceId: string, spanId: string) => `00-${traceId}-${spanId}-01`

/** The trace id and parent span id a provider request carried. */
function sentParent(headers: Record<string, unknown>): { traceId: string; parentId: string } | undefined {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(String(headers.traceparent ?? ''))
  return m ? { traceId: m[1]!, parentId: m[2]! } : undefined
}

t.test('spans of a request, its turn, its LLM calls, a compaction and memory searches, linked to the caller', async (t) => {
  const collector = await startOtlpCollector()
  t.teardown(() => collector.close())
  const h = await startBurrow(
    { ...MEM, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_SERVICE_NAME: 'burrow-under-test' },
    { fake: true },
  )
  let closed = false
  t.teardown(() => (closed ? undefined : h.close()))
  const { api, fake } = h
  const sid = await api.createSession({ model: 'openai:gpt-4o-mini', memory: true, compaction: { recent_turn_budget: 1 } })

  // A turn whose model calls the memory_search tool, then answers.
  const caller = { traceId: hex(16), spanId: hex(8) }
  fake.enqueue(
    { toolCalls: [{ name: 'memory_search', input: { query: 'build server' } }], usage: { input_tokens: 30, output_tokens: 5 } },
    { text: 'Nothing remembered.', usage: { input_tokens: 40, output_tokens: 7 } },
  )
  const first = await api.turn(
    sid,
    { input: 'What is the build server called?', temperature: 0.25 },
    { headers: { traceparent: traceparent(caller.traceId, caller.spanId) } },
  )
  t.equal(first.status, 200)
  t.equal(first.body.status, 'completed')
  const turnRequests = fake.requests.filter((r) => r.api === 'openai')
  t.equal(turnRequests.length, 2)
  t.same(
    turnRequests.map((r) => r.body.temperature),
    [0.25, 0.25],
    'the model settings reach the provider through the traced client',
  )

  // Two more turns (no traceparent: each starts a trace of its own), then a manual compaction.
  for (let i = 0; i < 2; i++) {
    fake.enqueue({ text: `a${i}` })
    t.equal((await api.turn(sid, { input: `q${i}` })).status, 200)
  }
  const compactCaller = { traceId: hex(16), spanId: hex(8) }
  fake.enqueue({ text: 'the summary', usage: { input_tokens: 20, output_tokens: 4 } })
  const c = await api.post(`/v1/sessions/${sid}/compact`, undefined, {
    headers: { traceparent: traceparent(compactCaller.traceId, compactCaller.spanId) },
  })
  t.equal(c.body.compacted, true)

  const searchCaller = { traceId: hex(16), spanId: hex(8) }
  const search = await api.get('/v1/memory/search?q=build', {
    headers: { traceparent: traceparent(searchCaller.traceId, searchCaller.spanId) },
  })
  t.equal(search.status, 200)

  await h.close() // flushes the last spans
  closed = true
  const spans = collector.spans
  const byId = new Map(spans.map((s) => [s.spanId, s]))
  const children = (parent: CollectedSpan) => spans.filter((s) => s.parentSpanId === parent.spanId)

  // The request span is the caller's child, named by route template.
  const request = spans.find((s) => s.traceId === caller.traceId && s.kind === 2)!
  t.ok(request, 'the turn request has a server span in the caller trace')
  t.equal(request.name, 'POST /v1/sessions/{id}/turns')
  t.equal(request.parentSpanId, caller.spanId, 'parented to the incoming traceparent')
  t.match(request.attributes, { 'http.request.method': 'POST', 'http.route': '/v1/sessions/{id}/turns', 'http.response.status_code': 200 })
  t.equal(request.resource['service.name'], 'burrow-under-test')

  const [turn, ...others] = children(request)
  t.equal(others.length, 0)
  t.equal(turn!.name, 'turn')
  t.match(turn!.attributes, { 'burrow.session.id': sid, 'burrow.turn.number': 1, 'burrow.turn.status': 'completed' })

  const llm = children(turn!).filter((s) => s.name === 'chat gpt-4o-mini')
  t.equal(llm.length, 2, 'one span per LLM call, children of the turn')
  for (const s of llm) {
    t.equal(s.kind, 3, 'client span')
    t.equal(s.traceId, caller.traceId)
    t.match(s.attributes, {
      'gen_ai.operation.name': 'chat',
      'gen_ai.system': 'openai',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o-mini',
      'gen_ai.request.max_tokens': 4096,
      'gen_ai.request.temperature': 0.25,
    })
  }
  t.match(llm.map((s) => s.attributes['gen_ai.usage.input_tokens']).sort(), [30, 40])
  const answer = llm.find((s) => s.attributes['gen_ai.usage.output_tokens'] === 7)!
  t.same(answer.attributes['gen_ai.response.finish_reasons'], ['end_turn'])

  // The provider saw the LLM-call span as its parent.
  const sent = turnRequests.map((r) => sentParent(r.headers))
  t.same(
    sent.map((p) => p?.traceId),
    [caller.traceId, caller.traceId],
  )
  t.same(sent.map((p) => p?.parentId).sort(), llm.map((s) => s.spanId).sort(), 'traceparent names the LLM-call span')

  const toolSearch = children(turn!).find((s) => s.name === 'memory_search')!
  t.ok(toolSearch, 'the memory_search tool ran in a span under the turn')
  t.match(toolSearch.attributes, { 'burrow.memory.source': 'tool', 'gen_ai.tool.name': 'memory_search', 'burrow.memory.scope': 'tenant' })

  // The manual compaction: request span → compaction span → its summary call.
  const compactRequest = spans.find((s) => s.traceId === compactCaller.traceId && s.kind === 2)!
  t.equal(compactRequest.name, 'POST /v1/sessions/{id}/compact')
  t.equal(compactRequest.parentSpanId, compactCaller.spanId)
  const compaction = children(compactRequest).find((s) => s.name === 'compaction')!
  t.ok(compaction, 'a compaction span')
  t.match(compaction.attributes, { 'burrow.compaction.manual': true, 'burrow.compaction.compacted': true })
  const summary = children(compaction)
  t.equal(summary.length, 1)
  t.match(summary[0]!.attributes, { 'gen_ai.request.model': 'gpt-4o-mini', 'gen_ai.usage.output_tokens': 4 })
  const summaryCall = fake.requests.filter((r) => r.api === 'openai').at(-1)!
  t.equal(sentParent(summaryCall.headers)?.parentId, summary[0]!.spanId)

  // The REST memory search.
  const searchRequest = spans.find((s) => s.traceId === searchCaller.traceId && s.kind === 2)!
  t.equal(searchRequest.name, 'GET /v1/memory/search')
  t.equal(searchRequest.attributes['url.path'], '/v1/memory/search', 'no query string')
  const apiSearch = children(searchRequest).find((s) => s.name === 'memory_search')!
  t.match(apiSearch.attributes, { 'burrow.memory.source': 'api', 'burrow.memory.limit': 5 })

  // Every parent named is a span the collector has, or a caller's.
  const callers = new Set([caller.spanId, compactCaller.spanId, searchCaller.spanId])
  for (const s of spans) if (s.parentSpanId) t.ok(byId.has(s.parentSpanId) || callers.has(s.parentSpanId), `${s.name} has a known parent`)
})

t.test('a failed LLM call: the LLM and turn spans are errors with the code', async (t) => {
  const collector = await startOtlpCollector()
  t.teardown(() => collector.close())
  const h = await startBurrow({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, BURROW_PROVIDER_MAX_RETRIES: '0' }, { fake: true })
  const { api, fake } = h
  const sid = await api.createSession({ model: 'openai:gpt-4o-mini' })
  fake.enqueue({ status: 401, errorMessage: 'bad key' })
  const r = await api.turn(sid, { input: 'hi' })
  t.equal(r.body.code, 'PROVIDER_ERROR')
  await h.close()
  const turn = collector.spans.find((s) => s.name === 'turn')!
  t.match(turn, { status: { code: 2 }, attributes: { 'error.type': 'PROVIDER_ERROR', 'burrow.turn.status': 'failed' } })
  const llm = collector.spans.find((s) => s.parentSpanId === turn.spanId)!
  t.match(llm, { name: 'chat gpt-4o-mini', status: { code: 2 }, attributes: { 'error.type': 'PROVIDER_ERROR' } })
  const request = collector.spans.find((s) => s.spanId === turn.parentSpanId)!
  t.match(request, { kind: 2, attributes: { 'http.response.status_code': 502, 'error.type': 'PROVIDER_ERROR' } })
})

t.test('tracing unset: no export is attempted and no traceparent is sent', async (t) => {
  const collector = await startOtlpCollector()
  t.teardown(() => collector.close())
  const h = await startBurrow({}, { fake: true })
  const { api, fake } = h
  const sid = await api.createSession({ model: 'openai:gpt-4o-mini' })
  fake.enqueue({ text: 'hello' })
  const r = await api.turn(sid, { input: 'hi' }, { headers: { traceparent: traceparent(hex(16), hex(8)) } })
  t.equal(r.status, 200)
  t.notMatch(String((await api.get('/metrics')).body), /burrow_trace_spans_dropped_total/, 'no tracing metric either')
  await h.close()
  t.equal(fake.requests[0]!.headers.traceparent, undefined, 'the provider call carries no trace context')
  t.equal(collector.requests.length, 0)
})

t.test('a collector that is down never blocks requests or shutdown', async (t) => {
  // A port nobody listens on: bound, then released.
  const probe = createServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const port = (probe.address() as { port: number }).port
  await new Promise<void>((resolve) => probe.close(() => resolve()))
  const h = await startBurrow({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_BSP_SCHEDULE_DELAY: '20' }, { fake: true })
  const { api, fake } = h
  const dropped = async () => {
    const text = String((await api.get('/metrics')).body)
    return Object.fromEntries(
      [...text.matchAll(/^burrow_trace_spans_dropped_total\{reason="(\w+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]),
    )
  }
  t.same(await dropped(), { queue_full: 0, export_failed: 0 }, 'nothing lost yet: both reasons at 0')
  const sid = await api.createSession({ model: 'openai:gpt-4o-mini' })
  fake.enqueue({ text: 'hello' })
  t.equal((await api.turn(sid, { input: 'hi' })).status, 200)
  const lost = await eventually(async () => ((await dropped()).export_failed ?? 0) >= 3 && (await dropped()), 10_000)
  t.match(lost, { export_failed: Number, queue_full: 0 }, 'the spans of the failed exports are counted on /metrics')
  const t0 = performance.now()
  await h.close()
  t.ok(performance.now() - t0 < 15_000, 'shutdown is bounded')
  t.ok(
    h.logs.some((l) => l.level === 40 && /spans/.test(l.msg)),
    'the failed export is logged',
  )
})

t.test('an unsampled caller: no spans recorded, its trace context still reaches the provider', async (t) => {
  const collector = await startOtlpCollector()
  t.teardown(() => collector.close())
  const h = await startBurrow({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url }, { fake: true })
  const { api, fake } = h
  const sid = await api.createSession({ model: 'openai:gpt-4o-mini' })
  const unsampled = hex(16)
  const sampled = hex(16)
  fake.enqueue({ text: 'one' }, { text: 'two' })
  t.equal((await api.turn(sid, { input: 'a' }, { headers: { traceparent: `00-${unsampled}-${hex(8)}-00` } })).status, 200)
  t.equal((await api.turn(sid, { input: 'b' }, { headers: { traceparent: traceparent(sampled, hex(8)) } })).status, 200)
  await h.close()
  const sent = fake.requests.map((r) => String(r.headers.traceparent))
  t.match(sent[0], new RegExp(`^00-${unsampled}-[0-9a-f]{16}-00$`), 'the unsampled flag flows on')
  t.match(sent[1], new RegExp(`^00-${sampled}-[0-9a-f]{16}-01$`))
  t.equal(collector.spans.filter((s) => s.traceId === unsampled).length, 0, 'nothing of the unsampled trace is exported')
  t.equal(collector.spans.filter((s) => s.traceId === sampled).length, 3, 'request, turn and LLM call of the sampled one')
})

t.test('tracing off loads no tracing code: only app/burrow.ts imports it, dynamically; no OpenTelemetry SDK', async (t) => {
  const { readdirSync, readFileSync } = await import('node:fs')
  const { join, relative } = await import('node:path')
  const src = new URL('../../src/', import.meta.url).pathname
  const files = (readdirSync(src, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts')).map((f) => join(src, f))
  const importers = (name: string) => files.filter((f) => readFileSync(f, 'utf8').includes(`/${name}.js'`)).map((f) => relative(src, f))
  t.same(
    files.filter((f) => /from '@opentelemetry\//.test(readFileSync(f, 'utf8'))),
    [],
    'spans and export are our own',
  )
  t.same(importers('otel-tracing'), ['app/burrow.ts'])
  t.same(importers('trace-spans').sort(), ['app/otel-tracing.ts', 'app/trace-export.ts'])
  t.same(importers('trace-export'), ['app/otel-tracing.ts'])
  const burrow = readFileSync(join(src, 'app/burrow.ts'), 'utf8')
  t.notMatch(burrow, /^import .*otel-tracing\.js/m, 'no static import')
  t.match(burrow, /await import\('\.\/otel-tracing\.js'\)/, 'imported when tracing is on')
})
