// Short-lived scoped tokens (POST /v1/tokens) through the real server: what each scope may do on
// REST, SSE (?access_token=) and JSON-RPC, the refusals' codes, and tenant isolation.
import t from 'tap'
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js'
import { Api, startBurrow } from '../../helpers/harness.js'

const KEYS = 'key-a:tenantA,key-b:tenantB'

t.test('tokens with keys configured', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb', BURROW_API_KEYS: KEYS })
  t.teardown(() => h.close())
  const a = new Api(h.url, 'key-a')
  const b = new Api(h.url, 'key-b')
  const mint = async (api: Api, body: Record<string, unknown>) => {
    const r = await api.post('/v1/tokens', body)
    if (r.status !== 200) throw new Error(`mint: ${r.status} ${JSON.stringify(r.body)}`)
    return r
  }
  const mine = await a.createSession()
  const other = await a.createSession()
  const theirs = await b.createSession()

  t.test('a key mints a token; the answer is not cacheable and says what it allows', async (t) => {
    const before = Date.now()
    const r = await mint(a, { scope: 'write', ttl_s: 120 })
    t.equal(r.headers['cache-control'], 'no-store')
    t.equal(r.body.token_type, 'Bearer')
    t.equal(r.body.scope, 'write')
    t.equal(r.body.session_id, null)
    t.ok(r.body.expires_in > 110 && r.body.expires_in <= 120)
    const exp = Date.parse(r.body.expires_at)
    t.ok(exp >= before + 119_000 && exp <= Date.now() + 121_000)
    t.ok(Date.parse(r.body.refresh_until) > exp)
    t.notOk(r.body.token.includes('key-a'))
  })

  t.test('a write token does what the key does, on its own tenant only', async (t) => {
    const w = new Api(h.url, (await mint(a, { scope: 'write' })).body.token)
    const id = await w.createSession()
    t.equal((await w.turn(id, { input: 'hello' })).status, 200)
    t.equal((await a.get(`/v1/sessions/${id}`)).body.turn_count, 1, 'the key sees what the token wrote')
    t.equal((await w.get(`/v1/sessions/${theirs}`)).status, 404, "another tenant's session does not exist for it")
    t.equal((await w.get(`/v1/sessions/${theirs}`)).body.code, 'SESSION_NOT_FOUND')
  })

  t.test('a read token reads and streams, and every write is FORBIDDEN', async (t) => {
    const token = (await mint(a, { scope: 'read' })).body.token
    const r = new Api(h.url, token)
    const before = await r.get(`/v1/sessions/${mine}`)
    t.equal(before.status, 200)
    t.equal((await r.get('/v1/sessions')).status, 200)
    t.equal((await r.get(`/v1/sessions/${mine}/notes`)).status, 200)
    const writes = [
      () => r.post('/v1/sessions', { model: 'offline:echo' }),
      () => r.turn(mine, { input: 'nope' }),
      () => r.post(`/v1/sessions/${mine}/interrupt`),
      () => r.post(`/v1/sessions/${mine}/archive`),
      () => r.delete(`/v1/sessions/${mine}`),
      () => r.call('PUT', `/v1/sessions/${mine}/notes/k`, { body: { value: 'v' } }),
      () => r.post('/v1/memory', [{ content: 'x' }]),
      () => r.post('/v1/tokens', { scope: 'write' }),
    ]
    for (const write of writes) {
      const res = await write()
      t.equal(res.status, 403)
      t.equal(res.body.code, 'FORBIDDEN')
      t.equal(res.headers['www-authenticate'], 'Bearer realm="burrow", error="insufficient_scope"')
    }
    const after = (await a.get(`/v1/sessions/${mine}`)).body
    t.same(
      [after.status, after.turn_count, after.notes],
      [before.body.status, before.body.turn_count, before.body.notes],
      'nothing was written',
    )
    t.equal((await r.post('/v1/tokens', { scope: 'read' })).status, 200, 'it refreshes itself')

    // EventSource sends no headers: the token goes in the query, on the session's stream and the tenant's.
    const stream = await r.sse(`/v1/sessions/${mine}/events?after=0&access_token=${encodeURIComponent(token)}`, { token: null })
    t.equal(stream.status, 200)
    t.equal((await stream.next())?.event, 'session_created')
    stream.close()
    const tenant = await r.sse(`/v1/events?access_token=${encodeURIComponent(token)}`, { token: null })
    t.equal(tenant.status, 200)
    await a.turn(mine, { input: 'seen by the read token' })
    const seen = await tenant.until((f) => f.event === 'turn_completed')
    t.ok(seen.every((f) => f.data.session_id === mine))
    tenant.close()
    t.notOk(JSON.stringify(h.logs).includes(token), 'the token is never logged')
  })

  t.test("a session's token reaches that session only", async (t) => {
    const minted = await mint(a, { scope: 'write', session_id: mine })
    t.equal(minted.body.session_id, mine)
    const s = new Api(h.url, minted.body.token)
    t.equal((await s.get(`/v1/sessions/${mine}`)).status, 200)
    t.equal((await s.turn(mine, { input: 'in scope' })).status, 200)
    for (const refused of [
      () => s.get(`/v1/sessions/${other}`),
      () => s.turn(other, { input: 'out of scope' }),
      () => s.get('/v1/sessions'),
      () => s.post('/v1/sessions', { model: 'offline:echo' }),
      () => s.get('/v1/memory/search?q=hello'),
      () => s.post('/v1/tokens', { scope: 'read', session_id: other }),
      // Refused the same for a session that does not exist: the token learns nothing of other sessions.
      () => s.post('/v1/tokens', { scope: 'read', session_id: '01930000-0000-7000-8000-0000000000ee' }),
    ]) {
      const res = await refused()
      t.equal(res.status, 403)
      t.equal(res.body.code, 'FORBIDDEN')
    }
    const tenant = await s.sse('/v1/events')
    t.equal(tenant.status, 403, "the tenant's stream is refused")
    t.equal(tenant.problem.code, 'FORBIDDEN')
    const narrowed = await s.post('/v1/tokens', { scope: 'read' })
    t.equal(narrowed.body.session_id, mine, 'a refresh keeps the session')
  })

  t.test('bad requests and bad tokens', async (t) => {
    for (const body of [{}, { scope: 'admin' }, { scope: 'read', ttl_s: 0 }, { scope: 'read', ttl_s: 3601 }, { scope: 'read', extra: 1 }]) {
      const r = await a.post('/v1/tokens', body)
      t.equal(r.status, 400, JSON.stringify(body))
      t.equal(r.body.code, 'INVALID_REQUEST')
    }
    const unknown = await a.post('/v1/tokens', { scope: 'read', session_id: '01930000-0000-7000-8000-0000000000ff' })
    t.equal(unknown.status, 404)
    t.equal(unknown.body.code, 'SESSION_NOT_FOUND')
    t.equal((await b.post('/v1/tokens', { scope: 'read', session_id: mine })).status, 404, "another tenant's session")
    t.equal((await new Api(h.url).post('/v1/tokens', { scope: 'read' })).status, 401, 'no credential')
    const token: string = (await mint(a, { scope: 'write' })).body.token
    const tampered = token.slice(0, -3) + (token.endsWith('AAA') ? 'BBB' : 'AAA')
    const r = await new Api(h.url, tampered).get(`/v1/sessions/${mine}`)
    t.equal(r.status, 401)
    t.equal(r.body.code, 'UNAUTHORIZED')
    t.equal(r.headers['www-authenticate'], 'Bearer realm="burrow", error="invalid_token"')
    const short = new Api(h.url, (await mint(a, { scope: 'read', ttl_s: 1 })).body.token)
    t.equal((await short.get(`/v1/sessions/${mine}`)).status, 200)
    await new Promise((r) => setTimeout(r, 2100))
    const expired = await short.get(`/v1/sessions/${mine}`)
    t.equal(expired.status, 401, 'expired')
    t.match(expired.body.detail, /expired/)
  })

  t.test('JSON-RPC over HTTP takes the same tokens and answers FORBIDDEN with its number', async (t) => {
    const token = (await mint(a, { scope: 'read' })).body.token
    const rpc = (method: string, params: unknown) => new Api(h.url, token).post('/rpc', { jsonrpc: '2.0', id: 1, method, params })
    const read = await rpc('session/read', { session_id: mine })
    t.equal(read.body.result.session_id, mine)
    const refused = await rpc('session/create', {})
    t.equal(refused.body.error.code, -32024)
    t.equal(refused.body.error.data.code, 'FORBIDDEN')
  })

  t.test('MCP over HTTP takes the same tokens: a read token lists, a write is FORBIDDEN', async (t) => {
    const token = (await mint(a, { scope: 'read' })).body.token
    const call = async (name: string, args: Record<string, unknown>) => {
      const res = await fetch(`${h.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': LATEST_PROTOCOL_VERSION,
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }),
      })
      const text = await res.text()
      const data = text.split('\n').find((l) => l.startsWith('data: '))
      return JSON.parse(data ? data.slice(6) : text)
    }
    const read = await call('session_read', { session_id: mine })
    t.equal(read.result?.structuredContent?.session_id, mine)
    const refused = await call('session_create', { model: 'offline:echo' })
    const error = refused.error ?? refused.result
    t.match(JSON.stringify(error), /FORBIDDEN/, 'the write is refused with FORBIDDEN')
  })
})

t.test('single-tenant: tokens need no key and still keep their scope', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb' })
  t.teardown(() => h.close())
  const anon = new Api(h.url)
  const id = await anon.createSession()
  const minted = await anon.post('/v1/tokens', { scope: 'read' })
  t.equal(minted.status, 200)
  const r = new Api(h.url, minted.body.token)
  t.equal((await r.get(`/v1/sessions/${id}`)).status, 200)
  const refused = await r.turn(id, { input: 'x' })
  t.equal(refused.status, 403)
  t.equal(refused.body.code, 'FORBIDDEN')
  t.equal((await anon.turn(id, { input: 'x' })).status, 200, 'without the token, single-tenant as before')
})
