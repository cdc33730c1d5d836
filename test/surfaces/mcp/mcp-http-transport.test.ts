// The stateless MCP HTTP transport at the wire: the streamable-HTTP checks it keeps from the
// SDK's transport, request ids mapped per POST (concurrent clients that all say id 1, a
// batch of calls on one stream), and the direct tools/call path answering exactly as the
// SDK's request path does.
import t from 'tap'
import { connect } from 'node:net'
import { request } from 'undici'
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js'
import { ERROR_TABLE } from '../../../src/core/errors.js'
import { HttpMuxTransport } from '../../../src/surfaces/mcp/mcp-http-transport.js'
import { closeHarness } from '../../client/close.js'
import { startBurrow } from '../../helpers/harness.js'

const ACCEPT = 'application/json, text/event-stream'

interface Posted {
  status: number
  headers: Record<string, unknown>
  text: string
  messages: any[]
}

/** The data of each SSE event, parsed (or the JSON body, for a non-SSE answer). */
function messagesOf(type: string, text: string): any[] {
  if (!type.startsWith('text/event-stream')) return text ? [JSON.parse(text)] : []
  const out: any[] = []
  for (const block of text.split('\n\n')) {
    const lines = block.split('\n')
    if (block.trim() === '') continue
    t.equal(lines[0], 'event: message', 'every SSE event is a message event')
    out.push(
      JSON.parse(
        lines
          .filter((l) => l.startsWith('data: '))
          .map((l) => l.slice(6))
          .join('\n'),
      ),
    )
  }
  return out
}

t.test('MCP streamable HTTP, stateless, one server for every POST', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb' })
  t.teardown(() => closeHarness(h))
  const post = async (body: unknown, headers: Record<string, string> = {}): Promise<Posted> => {
    const res = await request(`${h.url}/mcp`, {
      method: 'POST',
      body: typeof body === 'string' ? body : JSON.stringify(body),
      headers: { 'content-type': 'application/json', accept: ACCEPT, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION, ...headers },
    })
    const text = await res.body.text()
    return { status: res.statusCode, headers: res.headers, text, messages: messagesOf(String(res.headers['content-type'] ?? ''), text) }
  }
  const rpc = (id: unknown, method: string, params: Record<string, unknown> = {}) => ({ jsonrpc: '2.0', id, method, params })
  const tool = (id: unknown, name: string, args: Record<string, unknown>, more: Record<string, unknown> = {}) =>
    rpc(id, 'tools/call', { name, arguments: args, ...more })

  const created = await post(tool(1, 'session_create', { model: 'offline:echo' }))
  t.equal(created.status, 200)
  t.match(created.headers['content-type'], /^text\/event-stream/)
  t.ok(created.headers['x-request-id'], 'the request id header survives the hijacked reply')
  const sid = created.messages[0].result.structuredContent.session_id as string
  const other = (await post(tool(1, 'session_create', { model: 'offline:echo' }))).messages[0].result.structuredContent.session_id as string

  await t.test('the checks of the SDK transport', async (t) => {
    // Every refusal is INVALID_REQUEST of the table (400, data.code), with the table's number
    // or JSON-RPC's own -32600 for a payload that is not a request.
    const invalid = ERROR_TABLE.INVALID_REQUEST
    const noSse = await post(rpc(1, 'tools/list'), { accept: 'application/json' })
    t.equal(noSse.status, invalid.http)
    t.match(noSse.messages[0], {
      jsonrpc: '2.0',
      id: null,
      error: { code: invalid.rpc, message: /Not Acceptable/, data: { code: 'INVALID_REQUEST', field: 'header/accept' } },
    })
    const version = await post(rpc(1, 'tools/list'), { 'mcp-protocol-version': '1999-01-01' })
    t.equal(version.status, invalid.http)
    t.match(version.messages[0], {
      error: {
        code: invalid.rpc,
        message: /Unsupported protocol version: 1999-01-01/,
        data: { code: 'INVALID_REQUEST', field: 'header/mcp-protocol-version' },
      },
    })
    const notRpc = await post({ hello: 'world' })
    t.equal(notRpc.status, invalid.http)
    t.match(
      notRpc.messages[0],
      { error: { code: -32600, data: { code: 'INVALID_REQUEST', field: 'body' } } },
      'JSON that is not a message is not a parse error',
    )
    const twoInits = await post([
      rpc(1, 'initialize', { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'a', version: '1' } }),
      rpc(2, 'tools/list'),
    ])
    t.equal(twoInits.status, invalid.http)
    t.match(twoInits.messages[0], {
      error: { code: -32600, message: /Only one initialization request/, data: { code: 'INVALID_REQUEST' } },
    })
    const empty = await post([])
    t.equal(empty.status, invalid.http, 'an empty batch')
    t.match(empty.messages[0], { error: { code: -32600, data: { code: 'INVALID_REQUEST' } } })
    const syntax = await post('{"jsonrpc": "2.0", "id": 1,')
    t.equal(syntax.status, invalid.http)
    t.match(
      syntax.messages[0],
      { error: { code: -32700, data: { code: 'INVALID_REQUEST', field: 'body' } } },
      'only a body that is not JSON is -32700',
    )
    const wrongType = await post('{}', { 'content-type': 'text/plain' })
    t.match(wrongType.messages[0], { error: { code: invalid.rpc, data: { code: 'INVALID_REQUEST', field: 'header/content-type' } } })
    const notes = await post({ jsonrpc: '2.0', method: 'notifications/initialized' })
    t.same([notes.status, notes.text], [202, ''], 'notifications only: 202, no body')
    const cancel = await post({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, reason: 'x' } })
    t.equal(cancel.status, 202, 'a cancellation is acknowledged (and dropped: stateless)')
    const init = await post(
      rpc('i', 'initialize', { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'a', version: '1' } }),
    )
    t.match(init.messages[0], { id: 'i', result: { protocolVersion: LATEST_PROTOCOL_VERSION, serverInfo: { name: 'burrow' } } })
    t.notOk(init.headers['mcp-session-id'], 'no session id: stateless')
  })

  await t.test("the SDK's own errors carry the table's code; none is left unanswered", async (t) => {
    const one = async (m: unknown) => {
      const r = await post(m)
      t.equal(r.status, 200)
      return r.messages[0]
    }
    t.match(
      await one(rpc(1, 'tools/list', { cursor: 5 })),
      {
        id: 1,
        error: {
          code: ERROR_TABLE.INVALID_REQUEST.rpc,
          message: /^params\/cursor is invalid/,
          data: { code: 'INVALID_REQUEST', field: 'params/cursor' },
        },
      },
      "the SDK's check of params: INVALID_REQUEST naming the field, not an internal error",
    )
    t.match(await one(rpc(2, 'no/such_method')), {
      id: 2,
      error: { code: ERROR_TABLE.ROUTE_NOT_FOUND.rpc, data: { code: 'ROUTE_NOT_FOUND' } },
    })
    t.match(await one(tool(3, 'no_such_tool', {})), {
      id: 3,
      error: { code: ERROR_TABLE.INVALID_REQUEST.rpc, data: { code: 'INVALID_REQUEST' } },
    })
    // The SDK drops a request whose _meta it refuses; the client used to wait forever.
    for (const meta of [5, { progressToken: { nested: true } }]) {
      t.match(await one(rpc(4, 'ping', { _meta: meta })), {
        id: 4,
        error: { code: -32600, data: { code: 'INVALID_REQUEST', field: 'params/_meta' } },
      })
      t.match(await one(tool(5, 'capabilities_get', {}, { _meta: meta })), {
        id: 5,
        error: { code: -32600, data: { code: 'INVALID_REQUEST' } },
      })
    }
    t.same((await one(rpc(6, 'ping', { _meta: { progressToken: 'p' } }))).result, {}, 'a valid _meta still works')
  })

  await t.test('ids: concurrent clients that all use id 1, and a batch on one stream', async (t) => {
    const inputs = Array.from({ length: 8 }, (_, i) => `client ${i}`)
    const answers = await Promise.all(inputs.map((input, i) => post(tool(1, 'turn_run', { session_id: i % 2 ? sid : other, input }))))
    const busy = answers.filter((a) => a.messages[0].result.isError)
    for (const a of busy)
      t.equal(a.messages[0].result.structuredContent.code, 'SESSION_BUSY', 'two turns at once on a session: one is busy')
    answers.forEach((a, i) => {
      t.equal(a.messages.length, 1)
      t.equal(a.messages[0].id, 1, 'each client gets its own id back')
      if (!a.messages[0].result.isError)
        t.equal(a.messages[0].result.structuredContent.output_text, `echo: ${inputs[i]}`, 'and its own answer')
    })
    t.ok(busy.length < inputs.length, 'some turns ran')

    const batch = await post([
      tool('a', 'turn_run', { session_id: sid, input: 'batched' }),
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      tool(7, 'session_read', { session_id: other }),
      rpc('c', 'tools/list'),
    ])
    t.equal(batch.status, 200)
    t.same(batch.messages.map((m) => m.id).sort(), [7, 'a', 'c'].sort(), 'one response per request, with the client ids')
    const byId = new Map(batch.messages.map((m) => [m.id, m]))
    t.equal(byId.get('a').result.structuredContent.output_text, 'echo: batched')
    t.equal(byId.get(7).result.structuredContent.session_id, other)
    t.ok(byId.get('c').result.tools.some((x: any) => x.name === 'turn_run'))
  })

  await t.test("the direct tools/call path answers as the SDK's request path", async (t) => {
    // A tools/call with a key beyond name/arguments/_meta goes through the SDK's Protocol.
    const both = async (name: string, args: Record<string, unknown>) => {
      const direct = (await post(tool(1, name, args))).messages
      const sdk = (await post(tool(1, name, args, { extra_key: true }))).messages
      return { direct, sdk }
    }
    const norm = (ms: any[]) => JSON.parse(JSON.stringify(ms).replace(/"(updated_at|created_at)":"[^"]+"/g, '"$1":"<t>"'))
    for (const [name, args] of [
      ['session_read', { session_id: sid }],
      ['session_read', { session_id: '01900000-0000-7000-8000-000000000000' }],
      ['session_list', { limit: 0 }],
      ['capabilities_get', {}],
      ['no_such_tool', {}],
    ] as const) {
      const { direct, sdk } = await both(name, args)
      t.same(norm(direct), norm(sdk), `${name} ${JSON.stringify(args)}`)
    }
    const unknown = (await post(tool(3, 'no_such_tool', {}))).messages[0]
    t.match(unknown, { id: 3, error: { code: -32602, message: /Unknown tool: no_such_tool/ } })

    // Progress notifications ride the call's stream before its response, with the client's token.
    const progress = (await post(tool(9, 'turn_run', { session_id: sid, input: 'with progress' }, { _meta: { progressToken: 'p1' } })))
      .messages
    t.ok(progress.length >= 2, 'progress, then the response')
    t.match(progress.at(-1), { id: 9, result: { structuredContent: { output_text: 'echo: with progress' } } })
    for (const m of progress.slice(0, -1)) t.match(m, { method: 'notifications/progress', params: { progressToken: 'p1' } })
    t.notOk(
      progress.slice(0, -1).some((m) => 'id' in m),
      'notifications carry no id',
    )
  })

  await t.test('a client that goes away: its turn runs on, its answer is dropped, the server serves on', async (t) => {
    const before = (await post(tool(1, 'session_read', { session_id: other }))).messages[0].result.structuredContent.turn_count as number
    // A whole request on a raw socket that closes as soon as it is written.
    const body = JSON.stringify(tool(1, 'turn_run', { session_id: other, input: 'nobody listens' }))
    const { port } = new URL(h.url)
    await new Promise<void>((resolve, reject) => {
      const sock = connect(Number(port), '127.0.0.1', () => {
        sock.end(
          `POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: ${ACCEPT}\r\n` +
            `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
          () => {
            sock.destroy()
            resolve()
          },
        )
      })
      sock.on('error', reject)
    })
    // One turn at a time per session: wait until the abandoned turn has ended, then run another.
    let turns = before
    for (let i = 0; i < 100 && turns === before; i++) {
      await new Promise((r) => setTimeout(r, 20))
      turns = (await post(tool(1, 'session_read', { session_id: other }))).messages[0].result.structuredContent.turn_count
    }
    t.equal(turns, before + 1, 'the abandoned turn completed')
    const next = (await post(tool(7, 'turn_run', { session_id: other, input: 'still here' }))).messages
    t.match(next, [{ id: 7, result: { structuredContent: { output_text: 'echo: still here', turn: before + 2 } } }])
  })
})

t.test('a closed transport refuses with SHUTTING_DOWN from the error table', async (t) => {
  const transport = new HttpMuxTransport()
  let closed = 0
  transport.onclose = () => {
    closed++
  }
  await transport.close()
  await transport.close()
  t.equal(closed, 1, 'onclose once')
  // The refusal comes before the response is touched.
  const refused = transport.handle(
    { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    ACCEPT,
    undefined,
    null as never,
    { apiKey: undefined, requestId: 'r' },
    {},
  )
  t.same(refused, {
    status: ERROR_TABLE.SHUTTING_DOWN.http,
    code: ERROR_TABLE.SHUTTING_DOWN.rpc,
    message: ERROR_TABLE.SHUTTING_DOWN.message,
    burrowCode: 'SHUTTING_DOWN',
  })
  t.equal(refused!.status, 503)
})

t.test('what HTTP refuses before MCP reads a message carries its table row', async (t) => {
  const h = await startBurrow({ BURROW_BODY_LIMIT_BYTES: String(64 * 1024), BURROW_RATE_LIMIT_PER_MINUTE: '4' })
  t.teardown(() => closeHarness(h))
  const post = async (body: string) => {
    const res = await request(`${h.url}/mcp`, { method: 'POST', body, headers: { 'content-type': 'application/json', accept: ACCEPT } })
    const text = await res.body.text()
    return { status: res.statusCode, headers: res.headers, body: messagesOf(String(res.headers['content-type']), text)[0] }
  }
  const big = await post(
    JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'session_create', arguments: { system_prompt: 'x'.repeat(100_000) } },
    }),
  )
  t.equal(big.status, ERROR_TABLE.PAYLOAD_TOO_LARGE.http)
  t.same(big.body.error.data, { code: 'PAYLOAD_TOO_LARGE' })
  t.equal(big.body.error.code, ERROR_TABLE.PAYLOAD_TOO_LARGE.rpc, 'over the limit: not a parse error')
  const get = await request(`${h.url}/mcp`, { headers: { accept: ACCEPT } })
  t.equal(get.statusCode, 405, 'GET: 405, as the MCP specification asks of a server without a standalone stream')
  t.match(await get.body.json(), {
    jsonrpc: '2.0',
    id: null,
    error: { code: ERROR_TABLE.ROUTE_NOT_FOUND.rpc, data: { code: 'ROUTE_NOT_FOUND' } },
  })
  let limited: Awaited<ReturnType<typeof post>> | undefined
  for (let i = 0; i < 5 && !limited; i++) {
    const r = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }))
    if (r.status !== 200) limited = r
  }
  t.equal(limited?.status, ERROR_TABLE.RATE_LIMITED.http)
  t.ok(Number(limited?.headers['retry-after']) > 0)
  t.match(limited?.body, { id: null, error: { code: ERROR_TABLE.RATE_LIMITED.rpc, data: { code: 'RATE_LIMITED' } } })
})
