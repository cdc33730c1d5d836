// JSON nested far deeper than anything real (a tool's input_schema, or junk anywhere in a
// request) on REST, JSON-RPC and MCP: INVALID_REQUEST naming the field, never a 500 or a
// stack overflow, with an Idempotency-Key too (hashing the request recurses).
import t from 'tap'
import { request } from 'undici'
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js'
import { ERROR_TABLE } from '../../src/core/errors.js'
import { startBurrow } from '../helpers/harness.js'

/** `{"a":{"a":…1…}}`, `levels` objects deep, as text (building it as a value would recurse to stringify). */
const deepObject = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`
const deepArray = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`
/** A tools array whose input_schema nests `levels` deep in all (the schema object is level 1). */
const tools = (levels: number) => `[{"name":"deep","input_schema":{"type":"object","properties":${deepObject(levels - 1)}}}]`

t.test('deeply nested JSON is INVALID_REQUEST naming the field, on every surface', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb', BURROW_DURABILITY: 'relaxed' })
  t.teardown(() => h.close())
  const send = async (path: string, body: string, headers: Record<string, string> = {}) => {
    const r = await request(`${h.url}${path}`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    })
    const text = await r.body.text()
    const type = String(r.headers['content-type'])
    const json = type.startsWith('text/event-stream')
      ? JSON.parse(
          text
            .split('\n')
            .find((l) => l.startsWith('data: '))!
            .slice(6),
        )
      : JSON.parse(text)
    return { status: r.statusCode, json }
  }

  await t.test('REST', async (t) => {
    for (const [label, body, field, detail] of [
      [
        'input_schema 65 levels deep (the service bound)',
        `{"tools":${tools(65)}}`,
        'body/tools/0/input_schema',
        /nests deeper than 64 levels/,
      ],
      [
        'input_schema 129 levels deep (the surface bound)',
        `{"tools":${tools(129)}}`,
        'body/tools/0/input_schema',
        /nests deeper than 128 levels/,
      ],
      ['input_schema 10 000 levels deep', `{"tools":${tools(10_000)}}`, 'body/tools/0/input_schema', /nests deeper than 128 levels/],
      ['input_schema a million levels deep', `{"tools":${tools(1_000_000)}}`, 'body/tools/0/input_schema', /nests deeper/],
      ['junk in a string map', `{"metadata":{"a":${deepArray(100_000)}}}`, 'body/metadata/a', /nests deeper/],
      ['a whole body of arrays', deepArray(100_000), 'body', /nests deeper/],
    ] as const) {
      for (const headers of [{}, { 'idempotency-key': `deep-${label}` }] as Array<Record<string, string>>) {
        const r = await send('/v1/sessions', body, headers)
        t.equal(r.status, 400, `${label} ${JSON.stringify(headers)}`)
        t.match(r.json, { code: 'INVALID_REQUEST', field, detail }, label)
      }
    }
    const ok = await send('/v1/sessions', `{"tools":${tools(64)}}`)
    t.equal(ok.status, 201, 'an input_schema of 64 levels is accepted')
    t.equal(JSON.stringify(ok.json.tools[0].input_schema).split('{').length - 1, 64, 'and kept whole')
  })

  await t.test('JSON-RPC', async (t) => {
    const rpc = (method: string, params: string) => send('/rpc', `{"jsonrpc":"2.0","id":7,"method":"${method}","params":${params}}`)
    for (const [method, params, field] of [
      ['session/create', `{"tools":${tools(10_000)}}`, 'params/tools/0/input_schema'],
      ['session/create', `{"idempotency_key":"k","tools":${tools(10_000)}}`, 'params/tools/0/input_schema'],
      ['session/create', `{"tools":${tools(100)}}`, 'body/tools/0/input_schema'],
      ['turn/start', `{"session_id":"01900000-0000-7000-8000-000000000000","input":${deepArray(100_000)}}`, 'params/input/0'],
      ['memory/add', `{"entries":[{"content":"x","metadata":${deepObject(100_000)}}]}`, 'params/entries/0/metadata/a'],
    ] as const) {
      const r = await rpc(method, params)
      t.equal(r.status, 200, method)
      t.match(
        r.json,
        { jsonrpc: '2.0', id: 7, error: { code: ERROR_TABLE.INVALID_REQUEST.rpc, data: { code: 'INVALID_REQUEST', field } } },
        `${method}: ${field}`,
      )
    }
    const unknown = await rpc('no/such', deepObject(100_000))
    t.equal(unknown.json.error.data.code, 'ROUTE_NOT_FOUND', 'an unknown method does not look at its params')
    const batch = await send('/rpc', deepArray(100_000))
    t.match(batch.json, [{ error: { code: -32600, data: { code: 'INVALID_REQUEST' } } }], 'a batch of nested arrays is one invalid request')
  })

  await t.test('MCP', async (t) => {
    const mcp = (params: string) =>
      send('/mcp', `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":${params}}`, { 'mcp-protocol-version': LATEST_PROTOCOL_VERSION })
    for (const [args, field] of [
      [`{"tools":${tools(10_000)}}`, 'arguments/tools/0/input_schema'],
      [`{"tools":${tools(100)}}`, 'body/tools/0/input_schema'],
      [`{"metadata":${deepObject(100_000)}}`, 'arguments/metadata/a'],
    ] as const) {
      const r = await mcp(`{"name":"session_create","arguments":${args}}`)
      t.equal(r.status, 200)
      t.match(r.json, { id: 3, result: { isError: true, structuredContent: { code: 'INVALID_REQUEST', field } } }, field)
    }
    // _meta is the SDK's: nothing reads more of it than progressToken.
    const meta = await mcp(`{"name":"capabilities_get","arguments":{},"_meta":${deepObject(100_000)}}`)
    t.match(meta.json, { id: 3, result: { structuredContent: { session_store: true } } }, 'a deep _meta is harmless')
  })

  t.equal((await h.api.get('/healthz')).status, 200, 'the process lives on')
  t.same(
    h.logs.filter((l) => l.level >= 50).map((l) => l.err?.message ?? l.msg),
    [],
    'no internal error',
  )
})
