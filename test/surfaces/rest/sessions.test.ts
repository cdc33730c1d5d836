import t from 'tap'
import { MODES, startBurrow } from '../../helpers/harness.js'

const PERSISTENCE_MSG = "Session persistence is disabled (build without 'session-store')."
const COMPACTION_MSG = "Session compaction is disabled (build without 'session-compaction')."

for (const mode of MODES)
  t.test(`${mode.name}: create sessions; persistence operations per capability`, async (t) => {
    const h = await startBurrow(mode.env, { fake: true })
    t.teardown(() => h.close())
    const { api } = h

    t.test('create returns 201 with a UUIDv7 id and the effective configuration', async (t) => {
      const r = await api.post('/v1/sessions', {
        model: 'offline:echo',
        system_prompt: 'Be brief.',
        metadata: { owner: 'ana' },
        tools: [
          { name: 'get_weather', description: 'Weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
        ],
        max_total_tokens: 5000,
      })
      t.equal(r.status, 201)
      t.match(r.body.session_id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'UUIDv7')
      t.equal(r.headers.location, `/v1/sessions/${r.body.session_id}`)
      t.same(r.body, {
        session_id: r.body.session_id,
        status: 'active',
        created_at: r.body.created_at,
        model: 'offline:echo',
        system_prompt: 'Be brief.',
        metadata: { owner: 'ana' },
        memory: false,
        compaction: null,
        tools: [
          { name: 'get_weather', description: 'Weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
        ],
        max_total_tokens: 5000,
        model_settings: {},
      })
      const a = await api.createSession()
      const b = await api.createSession()
      t.ok(a < b, 'ids are time-ordered')
    })

    t.test('an empty body creates a session on the default model', async (t) => {
      const r1 = await api.call('POST', '/v1/sessions')
      t.equal(r1.status, 201)
      t.equal(r1.body.model, 'offline:echo')
      const r2 = await api.call('POST', '/v1/sessions', { rawBody: '', contentType: 'application/json' })
      t.equal(r2.status, 201)
    })

    t.test('bad bodies are INVALID_REQUEST naming the field, never stripped or coerced', async (t) => {
      const cases: Array<[unknown, string]> = [
        [{ model: 'offline:echo', bogus: 1 }, 'body/bogus'],
        [{ model: 42 }, 'body/model'],
        [{ model: 'no-provider-prefix' }, 'body/model'],
        [{ model: 'nosuch:model' }, 'body/model'],
        [{ max_total_tokens: '5000' }, 'body/max_total_tokens'],
        [{ max_total_tokens: 0 }, 'body/max_total_tokens'],
        [{ metadata: { a: 1 } }, 'body/metadata/a'],
        [{ memory: 'true' }, 'body/memory'],
        [{ tools: [{ name: 'bad name!', input_schema: { type: 'object' } }] }, 'body/tools/0/name'],
        [
          {
            tools: [
              { name: 'x', input_schema: { type: 'object' } },
              { name: 'x', input_schema: { type: 'object' } },
            ],
          },
          'body/tools/1/name',
        ],
        [{ tools: [{ name: 'x' }] }, 'body/tools/0/input_schema'],
        [[], 'body'],
      ]
      for (const [body, field] of cases) {
        const r = await api.post('/v1/sessions', body)
        t.equal(r.status, 400, JSON.stringify(body))
        t.equal(r.body.code, 'INVALID_REQUEST')
        t.equal(r.body.field, field, `field for ${JSON.stringify(body)}`)
        t.ok(r.body.detail.startsWith(field), r.body.detail)
        t.equal(r.headers['content-type'], 'application/problem+json; charset=utf-8')
      }
    })

    t.test('malformed JSON and wrong content types are INVALID_REQUEST', async (t) => {
      const r = await api.call('POST', '/v1/sessions', { rawBody: '{"model":', contentType: 'application/json' })
      t.equal(r.status, 400)
      t.equal(r.body.code, 'INVALID_REQUEST')
      const r2 = await api.call('POST', '/v1/sessions', { rawBody: 'model=x', contentType: 'text/plain' })
      t.equal(r2.status, 400)
      t.equal(r2.body.code, 'INVALID_REQUEST')
      t.equal(r2.body.field, 'header/content-type')
    })

    t.test('a provider without credentials is PROVIDER_NOT_CONFIGURED', async (t) => {
      const h2 = await startBurrow()
      t.teardown(() => h2.close())
      const r = await h2.api.post('/v1/sessions', { model: 'anthropic:claude-sonnet-4-5' })
      t.equal(r.status, 503)
      t.equal(r.body.code, 'PROVIDER_NOT_CONFIGURED')
      t.match(r.body.detail, /ANTHROPIC_API_KEY/)
      const r2 = await h2.api.post('/v1/sessions', { model: 'openai:gpt-4o-mini' })
      t.equal(r2.body.code, 'PROVIDER_NOT_CONFIGURED')
    })

    t.test('capabilities that are off refuse with their code and exact message', async (t) => {
      const r = await api.post('/v1/sessions', { compaction: { auto_compact_threshold: 1000 } })
      t.equal(r.status, 501)
      t.equal(r.body.code, 'SESSION_COMPACTION_DISABLED')
      t.equal(r.body.detail, COMPACTION_MSG)
      const m = await api.post('/v1/sessions', { memory: true })
      t.equal(m.status, 501)
      t.equal(m.body.code, 'MEMORY_STORE_DISABLED')
      const id = await api.createSession()
      const c = await api.post(`/v1/sessions/${id}/compact`)
      t.equal(c.status, 501)
      t.equal(c.body.code, 'SESSION_COMPACTION_DISABLED')
      t.equal(c.body.detail, COMPACTION_MSG)
      const s = await api.get('/v1/memory/search?q=hello')
      t.equal(s.status, 501)
      t.equal(s.body.code, 'MEMORY_STORE_DISABLED')
      const add = await api.post('/v1/memory', [{ content: 'a fact' }])
      t.equal(add.body.code, 'MEMORY_STORE_DISABLED')
    })

    if (!mode.persistent)
      t.test('persistence operations answer SESSION_PERSISTENCE_DISABLED with the message of the code table', async (t) => {
        const id = await api.createSession()
        const calls = [
          () => api.get(`/v1/sessions/${id}`),
          () => api.get('/v1/sessions'),
          () => api.get('/v1/sessions?limit=5&status=active'),
          () => api.post(`/v1/sessions/${id}/archive`),
          () => api.delete(`/v1/sessions/${id}`),
          () => api.post(`/v1/sessions/${id}/resume`, { input: 'hi' }),
        ]
        for (const call of calls) {
          const r = await call()
          t.equal(r.status, 501)
          t.equal(r.body.code, 'SESSION_PERSISTENCE_DISABLED')
          t.equal(r.body.detail, PERSISTENCE_MSG)
          t.equal(r.body.title, 'Session persistence disabled')
          t.type(r.body.request_id, 'string')
        }
        const turn = await api.turn(id, { input: 'still works' })
        t.equal(turn.status, 200, 'the live session still takes turns')
      })

    t.test('unknown or malformed ids', async (t) => {
      const r = await api.turn('01900000-0000-7000-8000-000000000000', { input: 'x' })
      t.equal(r.status, 404)
      t.equal(r.body.code, 'SESSION_NOT_FOUND')
      const bad = await api.turn('not-a-uuid', { input: 'x' })
      t.equal(bad.status, 400)
      t.equal(bad.body.field, 'params/id')
    })

    t.test('unknown routes are problem documents', async (t) => {
      const r = await api.get('/v1/nope')
      t.equal(r.status, 404)
      t.equal(r.body.code, 'ROUTE_NOT_FOUND')
    })

    t.test('Idempotency-Key: a retry returns the first result; another body is a conflict', async (t) => {
      const headers = { 'idempotency-key': 'create-1' }
      const a = await api.post('/v1/sessions', { metadata: { n: '1' } }, { headers })
      const b = await api.post('/v1/sessions', { metadata: { n: '1' } }, { headers })
      t.equal(a.status, 201)
      t.same(b.body, a.body, 'same session back')
      const c = await api.post('/v1/sessions', { metadata: { n: '2' } }, { headers })
      t.equal(c.status, 422)
      t.equal(c.body.code, 'IDEMPOTENCY_CONFLICT')
      const d = await api.post('/v1/sessions', { metadata: { n: '1' } }, { headers: { 'idempotency-key': 'create-2' } })
      t.not(d.body.session_id, a.body.session_id, 'another key is another session')
    })
  })

t.test('bodies over the limit are PAYLOAD_TOO_LARGE', async (t) => {
  const h = await startBurrow({ BURROW_BODY_LIMIT_BYTES: '2048' })
  t.teardown(() => h.close())
  const id = await h.api.createSession()
  const r = await h.api.turn(id, { input: 'x'.repeat(5000) })
  t.equal(r.status, 413)
  t.equal(r.body.code, 'PAYLOAD_TOO_LARGE')
  const ok = await h.api.turn(id, { input: 'small' })
  t.equal(ok.status, 200, 'the session is unharmed')
  t.equal(ok.body.turn, 1, 'the refused request recorded nothing')
})
