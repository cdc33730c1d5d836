import t from 'tap'
import { readFile } from 'node:fs/promises'
import { startBurrow } from '../../helpers/harness.js'

/** Parses Prometheus text exposition into name{labels} → value. */
function metrics(text: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue
    const i = line.lastIndexOf(' ')
    out.set(line.slice(0, i), Number(line.slice(i + 1)))
  }
  return out
}

t.test('ops endpoints, logs and metrics', async (t) => {
  const h = await startBurrow({}, { fake: true })
  t.teardown(() => h.close())
  const { api } = h

  t.test('capabilities report the build, providers and version', async (t) => {
    const r = await api.get('/v1/capabilities')
    const pkg = JSON.parse(await readFile(new URL('../../../package.json', import.meta.url), 'utf8'))
    t.same(r.body, {
      session_store: false,
      memory_store: false,
      session_compaction: false,
      version: pkg.version,
      auth: false,
      default_model: 'offline:echo',
      providers: [
        { name: 'anthropic', configured: true, offline: false, default_model: 'anthropic:claude-sonnet-4-5' },
        { name: 'openai', configured: true, offline: false, default_model: 'openai:gpt-4o-mini' },
        { name: 'offline', configured: true, offline: true, default_model: 'offline:echo' },
      ],
    })
  })

  t.test('health and readiness', async (t) => {
    t.same((await api.get('/healthz')).body, { status: 'ok' })
    t.same((await api.get('/readyz')).body, { status: 'ready' })
  })

  t.test('the start-up line names capabilities, providers, data dir and address', async (t) => {
    const line = h.logs.find((l) => l.msg?.startsWith('burrow listening'))
    t.ok(line)
    t.same(line.capabilities, { session_store: false, memory_store: false, session_compaction: false })
    t.same(line.providers, ['anthropic', 'openai', 'offline (offline, deterministic)'])
    t.equal(line.data_dir, h.dataDir)
    t.equal(line.address, h.url)
  })

  t.test('every log line of a request carries its request id; the id is echoed', async (t) => {
    const id = await api.createSession()
    const r = await api.turn(id, { input: 'trace me' }, { headers: { 'x-request-id': 'req-abc.123' } })
    t.equal(r.headers['x-request-id'], 'req-abc.123')
    const lines = h.logs.filter((l) => l.request_id === 'req-abc.123')
    t.ok(lines.some((l) => l.msg === 'incoming request'))
    t.ok(lines.some((l) => l.msg === 'request completed'))
    const fail = await api.turn(id, {}, { headers: { 'x-request-id': 'req-bad' } })
    t.equal(fail.body.request_id, 'req-bad', 'problem bodies carry it')
    t.ok(h.logs.some((l) => l.request_id === 'req-bad' && l.code === 'INVALID_REQUEST'))
    const generated = await api.get('/healthz', { headers: { 'x-request-id': 'bad id with spaces' } })
    t.not(generated.headers['x-request-id'], 'bad id with spaces', 'unsafe ids are replaced')
  })

  t.test('metrics count requests, turns, provider calls and streams', async (t) => {
    const id = await api.createSession({ model: 'openai:gpt-4o-mini' })
    h.fake.enqueue({ text: 'counted' })
    await api.turn(id, { input: 'count me' })
    const s = await api.sse(`/v1/sessions/${id}/events`)
    const res = await api.get('/metrics')
    t.match(res.headers['content-type'], /^text\/plain/)
    const m = metrics(res.body)
    t.ok(m.get('burrow_turns_total{status="completed"}')! >= 1)
    t.ok(m.get('burrow_turn_duration_seconds_count{status="completed"}')! >= 1)
    t.ok(m.get('burrow_provider_request_duration_seconds_count{provider="openai",outcome="ok"}')! >= 1)
    t.ok(m.get('burrow_http_requests_total{method="POST",route="/v1/sessions/:id/turns",status="200"}')! >= 1)
    t.equal(m.get('burrow_sse_streams_active'), 1)
    s.close()
  })

  t.test('OpenAPI document and viewer', async (t) => {
    const doc = await api.get('/openapi.json')
    const committed = JSON.parse(await readFile(new URL('../../../openapi/openapi.json', import.meta.url), 'utf8'))
    t.same(doc.body, committed, 'served document = committed document')
    const docs = await fetch(`${h.url}/docs/`)
    t.equal(docs.status, 200)
    t.match(await docs.text(), /swagger-ui/i)
  })
})

t.test('rate limiting answers RATE_LIMITED problems', async (t) => {
  const h = await startBurrow({ BURROW_RATE_LIMIT_PER_MINUTE: '3' })
  t.teardown(() => h.close())
  for (let i = 0; i < 3; i++) t.equal((await h.api.get('/v1/capabilities')).status, 200)
  const r = await h.api.get('/v1/capabilities')
  t.equal(r.status, 429)
  t.equal(r.body.code, 'RATE_LIMITED')
  t.ok(r.headers['retry-after'], 'says when to retry')
  t.equal((await h.api.get('/healthz')).status, 200, 'health checks are not limited')
})

t.test('CORS for configured origins', async (t) => {
  const h = await startBurrow({ BURROW_CORS_ORIGINS: 'https://dash.example.com' })
  t.teardown(() => h.close())
  const pre = await fetch(`${h.url}/v1/sessions`, {
    method: 'OPTIONS',
    headers: {
      origin: 'https://dash.example.com',
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization,content-type,idempotency-key',
    },
  })
  t.equal(pre.status, 204)
  t.equal(pre.headers.get('access-control-allow-origin'), 'https://dash.example.com')
  t.match(pre.headers.get('access-control-allow-headers') ?? '', /idempotency-key/)
  t.match(pre.headers.get('access-control-allow-headers') ?? '', /traceparent, tracestate/, 'traced browser pages may send trace context')
  const other = await fetch(`${h.url}/v1/capabilities`, { headers: { origin: 'https://evil.example.com' } })
  t.equal(other.headers.get('access-control-allow-origin'), null)
})
