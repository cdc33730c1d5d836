// What fastify's router and Node's HTTP parser refuse, and bodies over the limit, answered
// on the raw wire: always a problem document of the code table, never fastify's JSON, a
// stack, HTML or a reset connection.
import t, { type Test } from 'tap'
import { ERROR_TABLE } from '../../../src/core/errors.js'
import { startBurrow } from '../../helpers/harness.js'
import { problemFaults, rpcErrorFaults } from '../../helpers/problem-check.js'
import { head, rawRequest, type RawResponse } from '../../helpers/raw-http.js'

const LIMIT = 64 * 1024

function isProblem(t: Test, r: RawResponse, code: keyof typeof ERROR_TABLE, field?: string): any {
  t.same(problemFaults(r.status, r.headers['content-type'], r.body), [], `${code}: a problem document (${r.raw.slice(0, 120)})`)
  const p = r.body ? JSON.parse(r.body) : {}
  t.equal(p.code, code)
  t.equal(p.field, field, `field ${field}`)
  t.equal(p.request_id, r.headers['x-request-id'], 'the request id is in the body and the header')
  t.notMatch(r.body, /\bat .*\.(ts|js):\d+/, 'no stack')
  return p
}

t.test('errors of the router and the HTTP parser are problems of the table', async (t) => {
  const h = await startBurrow({ BURROW_BODY_LIMIT_BYTES: String(LIMIT) })
  t.teardown(() => h.close())
  const id = await h.api.createSession()

  await t.test('malformed percent-encoding in the path', async (t) => {
    for (const path of [
      '/v1/sessions/%E0%A4%A',
      '/v1/sessions/%E0%A4%A?access_token=secret',
      '/v1/%ZZ/x',
      `/v1/sessions/${id}/notes/%FF`,
    ]) {
      const p = isProblem(t, await rawRequest(h.url, head('GET', path)), 'INVALID_REQUEST', 'path')
      t.notMatch(p.detail, /secret/, 'the URL is not echoed')
    }
  })

  await t.test('a path parameter over the router limit; note keys up to their documented 128 characters work', async (t) => {
    isProblem(t, await rawRequest(h.url, head('GET', `/v1/sessions/${'a'.repeat(10_000)}`)), 'INVALID_REQUEST', 'params')
    isProblem(t, await rawRequest(h.url, head('GET', `/v1/sessions/${id}/notes/${'k'.repeat(129)}`)), 'INVALID_REQUEST', 'params')
    const key = 'k'.repeat(128)
    const put = await h.api.call('PUT', `/v1/sessions/${id}/notes/${key}`, { body: { value: 'long key' } })
    t.equal(put.status, 200)
    t.equal(put.body.key, key)
  })

  await t.test("requests Node's parser refuses: answered on the socket, then closed", async (t) => {
    const cases: Array<[string, string, keyof typeof ERROR_TABLE, string | undefined]> = [
      ['a control character in a header value', head('GET', '/v1/capabilities', { 'x-note': 'a\x01b' }), 'INVALID_REQUEST', undefined],
      ['a control character in a header name', head('GET', '/v1/capabilities', { 'x-n\x02te': 'a' }), 'INVALID_REQUEST', undefined],
      ['headers over the size limit', head('GET', '/v1/capabilities', { 'x-big': 'a'.repeat(20_000) }), 'PAYLOAD_TOO_LARGE', 'header'],
      ['an unknown method', head('FROB', '/v1/sessions'), 'INVALID_REQUEST', 'method'],
      [
        'an invalid content-length',
        head('POST', '/v1/sessions', { 'content-type': 'application/json', 'content-length': 'abc' }),
        'INVALID_REQUEST',
        'header/content-length',
      ],
      [
        'two content-lengths',
        head('POST', '/v1/sessions', { 'content-type': 'application/json', 'content-length': '2', 'Content-Length': '3' }),
        'INVALID_REQUEST',
        'header/content-length',
      ],
      ['an unknown HTTP version', 'GET /v1/capabilities HTTP/7.1\r\nhost: x\r\n\r\n', 'INVALID_REQUEST', undefined],
      ['binary junk', '\x00\x01\x02\x03 junk\r\n\r\n', 'INVALID_REQUEST', 'method'],
    ]
    for (const [label, req, code, field] of cases) {
      const r = await rawRequest(h.url, req)
      t.equal(r.end, 'closed', `${label}: the server closes the connection`)
      isProblem(t, r, code, field)
    }
    const line = h.logs.find((l) => l.msg === 'malformed request refused')
    t.ok(line, 'refusals are logged')
    t.notOk(
      h.logs.some((l) => JSON.stringify(l).includes('a\\u0001b') || 'rawPacket' in (l.err ?? {})),
      'without the request bytes',
    )
  })

  await t.test('an unrouted method is ROUTE_NOT_FOUND; bodies that are not JSON objects are INVALID_REQUEST', async (t) => {
    isProblem(t, await rawRequest(h.url, head('PATCH', '/v1/sessions')), 'ROUTE_NOT_FOUND')
    const post = (body: string, type = 'application/json') =>
      rawRequest(h.url, head('POST', '/v1/sessions', { 'content-type': type, 'content-length': String(Buffer.byteLength(body)) }) + body)
    isProblem(t, await post('{"model":'), 'INVALID_REQUEST', 'body')
    isProblem(t, await post('{"model": x}'), 'INVALID_REQUEST', 'body')
    isProblem(t, await post('42'), 'INVALID_REQUEST', 'body')
    isProblem(t, await post('{"__proto__": {"model": "x"}}'), 'INVALID_REQUEST', 'body')
    isProblem(t, await post('{"\\u005f_proto__": {}}'), 'INVALID_REQUEST', 'body')
    isProblem(t, await post('{}', 'text/plain'), 'INVALID_REQUEST', 'header/content-type')
    t.equal((await post('{"model": "offline:echo", "model": "offline:echo"}')).status, 201, 'duplicate keys are JSON (the last wins)')
    const get = await rawRequest(
      h.url,
      head('GET', '/v1/capabilities', { 'content-type': 'application/json', 'content-length': '7' }) + '{"a":1}',
    )
    t.equal(get.status, 200, 'a body on GET is read and ignored')
  })

  await t.test('what the fuzz test found: Expect, HEAD, an SSE route asked for JSON, header field names', async (t) => {
    isProblem(t, await rawRequest(h.url, head('GET', '/v1/capabilities', { expect: 'something' })), 'INVALID_REQUEST', 'header/expect')
    const headMalformed = await rawRequest(h.url, head('HEAD', '/v1/capabilities', { 'x-note': 'a\x01b' }))
    t.equal(headMalformed.status, 400)
    t.equal(headMalformed.raw.split('\r\n\r\n')[1], '', 'the answer to a HEAD request has no body')
    for (const path of [`/v1/sessions/${id}/events`, '/v1/events']) {
      isProblem(t, await rawRequest(h.url, head('GET', path, { accept: 'application/json' })), 'INVALID_REQUEST', 'header/accept')
    }
    const r = await h.api.post('/v1/sessions', {}, { headers: { 'idempotency-key': 'k'.repeat(256) } })
    t.equal(r.body.field, 'header/idempotency-key', 'headers are named header/<name>, as everywhere')
  })

  t.same(
    h.logs.filter((l) => l.level >= 50),
    [],
    'nothing was an internal error',
  )
})

t.test('an over-limit body gets its 413 even when the client sends all of it before reading', async (t) => {
  const h = await startBurrow({ BURROW_BODY_LIMIT_BYTES: String(LIMIT) })
  t.teardown(() => h.close())
  const chunk = Buffer.alloc(4096, 'x')
  const chunks = Array.from({ length: (3 * LIMIT) / chunk.length }, () => chunk)
  const tooLarge = (path: string, r: RawResponse) => {
    if (path.startsWith('/v1/')) return isProblem(t, r, 'PAYLOAD_TOO_LARGE')
    // /rpc and /mcp answer JSON-RPC errors, under the same status.
    t.equal(r.status, ERROR_TABLE.PAYLOAD_TOO_LARGE.http)
    t.same(rpcErrorFaults(JSON.parse(r.body || 'null')?.error), [], `${path}: a JSON-RPC error of the table`)
  }
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
  for (const path of ['/v1/sessions', '/v1/memory', '/rpc', '/mcp']) {
    const declared = await rawRequest(h.url, head('POST', path, { ...headers, 'content-length': String(3 * LIMIT) }), {
      chunks,
      readAfterSending: true,
    })
    t.equal(declared.end, 'closed', `${path}, Content-Length: no reset (${declared.end})`)
    tooLarge(path, declared)
    const framed = chunks.map((c) => Buffer.concat([Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n')]))
    const chunked = await rawRequest(h.url, head('POST', path, { ...headers, 'transfer-encoding': 'chunked' }), {
      chunks: [...framed, '0\r\n\r\n'],
      readAfterSending: true,
    })
    t.equal(chunked.end, 'closed', `${path}, chunked: no reset (${chunked.end})`)
    tooLarge(path, chunked)
  }
  // Past the bound (16 bodies' worth here) the answer does not wait for the body: closing is fine then.
  const huge = await rawRequest(
    h.url,
    head('POST', '/v1/sessions', { 'content-type': 'application/json', 'content-length': String(32 * LIMIT) }),
    { timeoutMs: 2000 },
  )
  isProblem(t, huge, 'PAYLOAD_TOO_LARGE')
  const ok = await h.api.post('/v1/sessions', {})
  t.equal(ok.status, 201, 'the server serves on')
})
