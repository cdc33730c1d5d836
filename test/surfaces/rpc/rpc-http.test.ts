import t from 'tap'
import { request } from 'undici'
import { ERROR_TABLE } from '../../../src/core/errors.js'
import { MODES, startBurrow, type Harness } from '../../helpers/harness.js'

async function rpc(h: Harness, body: unknown, token?: string): Promise<{ status: number; body: any }> {
  const res = await request(`${h.url}/rpc`, {
    method: 'POST',
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
  })
  const text = await res.body.text()
  return { status: res.statusCode, body: text ? JSON.parse(text) : undefined }
}
const call = (h: Harness, method: string, params?: unknown, id: number | string = 1, token?: string) =>
  rpc(h, { jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) }, token).then((r) => r.body)

for (const mode of MODES)
  t.test(`${mode.name}: JSON-RPC over HTTP`, async (t) => {
    const h = await startBurrow(mode.env)
    t.teardown(() => h.close())

    t.test('methods map onto the service; results are the REST results', async (t) => {
      const created = await call(h, 'session/create', { metadata: { via: 'rpc' } })
      t.equal(created.jsonrpc, '2.0')
      t.equal(created.id, 1)
      const id = created.result.session_id
      t.match(created.result, { status: 'active', metadata: { via: 'rpc' }, model: 'offline:echo' })
      const turn = await call(h, 'turn/start', { session_id: id, input: 'hello rpc' }, 'a')
      t.equal(turn.id, 'a')
      t.match(turn.result, { session_id: id, turn: 1, status: 'completed', output_text: 'echo: hello rpc' })
      const caps = await call(h, 'capabilities/get', {})
      t.equal(caps.result.session_store, mode.persistent)
      const page = await call(h, 'events/list_since', { session_id: id, after: 1 })
      t.same(
        page.result.events.map((e: any) => e.type),
        ['turn_started', 'assistant_message', 'turn_completed'],
      )
      const interrupted = await call(h, 'turn/interrupt', { session_id: id })
      t.same(interrupted.result, { session_id: id, interrupted: false, turn: null })
      const note = await call(h, 'notes/put', { session_id: id, key: 'k', value: 'v' })
      t.match(note.result, { key: 'k', value: 'v' })
      if (mode.persistent) {
        t.equal((await call(h, 'session/read', { session_id: id })).result.turn_count, 1)
        t.ok((await call(h, 'session/list', { limit: 5 })).result.items.some((i: any) => i.session_id === id))
        t.same((await call(h, 'session/archive', { session_id: id })).result, { session_id: id, status: 'archived' })
        t.same((await call(h, 'session/delete', { session_id: id })).result, { session_id: id, deleted: true })
      }
    })

    t.test('errors: the table number in error.code, the string code in error.data.code', async (t) => {
      const read = await call(h, 'session/read', { session_id: '01900000-0000-7000-8000-000000000000' })
      if (mode.persistent) {
        t.same(read.error, {
          code: ERROR_TABLE.SESSION_NOT_FOUND.rpc,
          message: 'Session 01900000-0000-7000-8000-000000000000 not found.',
          data: { code: 'SESSION_NOT_FOUND' },
        })
      } else {
        t.same(read.error, {
          code: -32003,
          message: "Session persistence is disabled (build without 'session-store').",
          data: { code: 'SESSION_PERSISTENCE_DISABLED' },
        })
      }
      const bad = await call(h, 'session/create', { model: 5 })
      t.equal(bad.error.code, -32602)
      t.same(bad.error.data, { code: 'INVALID_REQUEST', field: 'params/model' })
      const extra = await call(h, 'turn/start', { session_id: '01900000-0000-7000-8000-000000000000', input: 'x', bogus: 1 })
      t.equal(extra.error.data.field, 'params/bogus')
      const nomethod = await call(h, 'session/teleport', {})
      t.equal(nomethod.error.code, -32601)
      t.equal(nomethod.error.data.code, 'ROUTE_NOT_FOUND')
      const positional = await call(h, 'session/read', ['x'])
      t.equal(positional.error.data.field, 'params')
      const compact = await call(h, 'session/compact', { session_id: (await call(h, 'session/create', {})).result.session_id })
      t.equal(compact.error.code, -32004)
      t.equal(compact.error.data.code, 'SESSION_COMPACTION_DISABLED')
    })

    t.test('protocol: parse errors, invalid requests, notifications and batches', async (t) => {
      const parse = await rpc(h, '{"jsonrpc": "2.0", "method"')
      t.equal(parse.status, 200)
      t.same(
        { ...parse.body, error: { ...parse.body.error, message: '' } },
        { jsonrpc: '2.0', id: null, error: { code: -32700, message: '', data: { code: 'INVALID_REQUEST' } } },
      )
      const notReq = await rpc(h, { method: 'capabilities/get' })
      t.equal(notReq.body.error.code, -32600)
      const notification = await rpc(h, { jsonrpc: '2.0', method: 'capabilities/get' })
      t.equal(notification.status, 204, 'a notification gets no response')
      const batch = await rpc(h, [
        { jsonrpc: '2.0', id: 1, method: 'capabilities/get' },
        { jsonrpc: '2.0', method: 'capabilities/get' },
        { jsonrpc: '2.0', id: 2, method: 'nope' },
        { foo: 1 },
      ])
      t.equal(batch.body.length, 3, 'one response per request, none for the notification')
      t.ok(batch.body.find((r: any) => r.id === 1).result)
      t.equal(batch.body.find((r: any) => r.id === 2).error.code, -32601)
      t.equal(batch.body.find((r: any) => r.id === null).error.code, -32600)
      t.equal((await rpc(h, [])).body.error.code, -32600)
    })

    t.test('idempotency keys', async (t) => {
      const a = await call(h, 'session/create', { idempotency_key: 'rpc-k' })
      const b = await call(h, 'session/create', { idempotency_key: 'rpc-k' })
      t.equal(a.result.session_id, b.result.session_id)
      const c = await call(h, 'session/create', { idempotency_key: 'rpc-k', metadata: { x: 'y' } })
      t.equal(c.error.data.code, 'IDEMPOTENCY_CONFLICT')
      t.equal(c.error.code, ERROR_TABLE.IDEMPOTENCY_CONFLICT.rpc)
    })
  })

t.test('JSON-RPC auth: the same keys and tenants as REST', async (t) => {
  const h = await startBurrow({ BURROW_API_KEYS: 'ka:alpha,kb:beta', BURROW_SESSION_STORE: 'lmdb' })
  t.teardown(() => h.close())
  t.equal((await call(h, 'session/create', {})).error.data.code, 'UNAUTHORIZED')
  const id = (await call(h, 'session/create', {}, 1, 'ka')).result.session_id
  t.equal((await call(h, 'session/read', { session_id: id }, 1, 'kb')).error.data.code, 'SESSION_NOT_FOUND')
  t.equal((await call(h, 'session/read', { session_id: id }, 1, 'ka')).result.session_id, id)
})

t.test('what HTTP refuses before JSON-RPC reads the body carries its table row: status, number, data.code', async (t) => {
  const h = await startBurrow({ BURROW_BODY_LIMIT_BYTES: String(64 * 1024) })
  t.teardown(() => h.close())
  const send = async (body: string, type = 'application/json') => {
    const res = await request(`${h.url}/rpc`, { method: 'POST', body, headers: { 'content-type': type } })
    const text = await res.body.text()
    return { status: res.statusCode, type: String(res.headers['content-type']), body: JSON.parse(text) }
  }
  const refusal = (code: keyof typeof ERROR_TABLE, extra: Record<string, unknown> = {}) => ({
    jsonrpc: '2.0',
    id: null,
    error: { code: ERROR_TABLE[code].rpc, data: { code, ...extra } },
  })

  const big = await send(
    JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'session/create', params: { system_prompt: 'x'.repeat(100_000) } }),
  )
  t.equal(big.status, ERROR_TABLE.PAYLOAD_TOO_LARGE.http)
  t.match(big.body, refusal('PAYLOAD_TOO_LARGE'), 'over the limit: PAYLOAD_TOO_LARGE, not a parse error')
  t.match(big.type, /^application\/json/)

  const text = await send('{"jsonrpc":"2.0","id":1,"method":"capabilities/get"}', 'text/plain')
  t.equal(text.status, ERROR_TABLE.INVALID_REQUEST.http)
  t.match(text.body, refusal('INVALID_REQUEST', { field: 'header/content-type' }), 'a content type that is not JSON')

  const poisoned = await send('{"jsonrpc":"2.0","id":1,"method":"session/create","params":{"__proto__":{"x":1}}}')
  t.equal(poisoned.status, ERROR_TABLE.INVALID_REQUEST.http)
  t.match(poisoned.body, refusal('INVALID_REQUEST', { field: 'body' }), 'prototype poisoning is JSON: not -32700')

  for (const [label, body] of [
    ['truncated', '{"jsonrpc":"2.0","id":1,'],
    ['not JSON', 'hello'],
    ['empty', ''],
  ] as const) {
    const r = await send(body)
    t.equal(r.status, 200, `${label}: JSON-RPC's own answer`)
    t.match(
      r.body,
      { jsonrpc: '2.0', id: null, error: { code: -32700, message: /^Parse error/, data: { code: 'INVALID_REQUEST' } } },
      label,
    )
  }
})

t.test('rate limited JSON-RPC: 429 with RATE_LIMITED and Retry-After', async (t) => {
  const h = await startBurrow({ BURROW_RATE_LIMIT_PER_MINUTE: '2' })
  t.teardown(() => h.close())
  const send = () =>
    request(`${h.url}/rpc`, {
      method: 'POST',
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'capabilities/get' }),
      headers: { 'content-type': 'application/json' },
    })
  for (let i = 0; i < 2; i++) t.equal(((await (await send()).body.json()) as any).result.version !== undefined, true)
  const limited = await send()
  t.equal(limited.statusCode, ERROR_TABLE.RATE_LIMITED.http)
  t.ok(Number(limited.headers['retry-after']) > 0, 'says when to retry')
  t.match(await limited.body.json(), {
    jsonrpc: '2.0',
    id: null,
    error: { code: ERROR_TABLE.RATE_LIMITED.rpc, message: /Too many requests/, data: { code: 'RATE_LIMITED' } },
  })
})
