// The MCP surface through the official MCP client: streamable HTTP (stateless) on a fastify
// instance of our own over the real service, the same server in memory, and stdio streams.
import t, { type Test } from 'tap'
import Fastify from 'fastify'
import { randomUUID } from 'node:crypto'
import { PassThrough } from 'node:stream'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import { LATEST_PROTOCOL_VERSION, type Progress } from '@modelcontextprotocol/sdk/types.js'
import { ERROR_TABLE } from '../../../src/core/errors.js'
import type { SessionService } from '../../../src/core/session-service.js'
import { CreateSessionSchema } from '../../../src/core/wire.js'
import { createMcpServer } from '../../../src/surfaces/mcp/mcp-server.js'
import { mcpHttpRoutes } from '../../../src/surfaces/mcp/mcp-http.js'
import { restApi, type RestMetrics } from '../../../src/surfaces/rest/rest-api.js'
import { runMcpStdio } from '../../../src/surfaces/mcp/mcp-stdio.js'
import { eventually, MODES, startBurrow, type Harness } from '../../helpers/harness.js'

const TOOLS = [
  'capabilities_get',
  'memory_delete',
  'memory_get',
  'memory_list',
  'memory_search',
  'session_archive',
  'session_create',
  'session_fork',
  'session_list',
  'session_read',
  'session_resume',
  'session_update',
  'turn_run',
]
const WEATHER = {
  name: 'get_weather',
  description: 'Weather for a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } } },
}

/** Our MCP routes on a fastify instance of their own, over the harness's real service. */
async function startMcp(service: SessionService, opts: { withRest?: boolean } = {}) {
  const app = Fastify({ forceCloseConnections: true })
  if (opts.withRest) {
    // As the app will mount it: inside the REST plugin, under its JSON parser and error handler.
    const metrics: RestMetrics = { observeHttp() {}, sseOpened() {}, sseClosed() {}, text: async () => '', contentType: 'text/plain' }
    await app.register(async (scope) => {
      await scope.register(restApi, { service, metrics })
      mcpHttpRoutes(scope, service)
    })
  } else {
    mcpHttpRoutes(app, service)
  }
  const url = `${await app.listen({ host: '127.0.0.1', port: 0 })}/mcp`
  const clients: Client[] = []
  return {
    url,
    async client(token?: string): Promise<Client> {
      const c = new Client({ name: 'burrow-test', version: '1.0.0' })
      const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {}
      await c.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }))
      clients.push(c)
      return c
    },
    /**
     * Closes the clients, then Burrow while our listener still holds the event loop open (the
     * projector's close can wait on an unref'd duty-cycle timer: with nothing else alive the
     * process would exit mid-teardown), then our listener.
     */
    async close(h: Harness) {
      await Promise.all(clients.map((c) => c.close()))
      await h.close()
      await app.close()
    },
  }
}

type Call = { isError?: boolean; content: Array<{ type: string; text: string }>; structuredContent: any }
const call = async (c: Client, name: string, args: Record<string, unknown> = {}, onprogress?: (p: Progress) => void) =>
  (await c.callTool({ name, arguments: args }, undefined, onprogress ? { onprogress } : {})) as unknown as Call

async function ok(t: Test, c: Client, name: string, args: Record<string, unknown> = {}) {
  const r = await call(c, name, args)
  t.notOk(r.isError, `${name} succeeds: ${r.content[0]?.text}`)
  t.equal(r.content[0]?.type, 'text')
  return r.structuredContent
}

async function fails(t: Test, c: Client, name: string, args: Record<string, unknown>, code: string, message?: string) {
  const r = await call(c, name, args)
  t.equal(r.isError, true, `${name} → ${code}`)
  t.equal(r.structuredContent?.code, code, r.content[0]?.text ?? code)
  t.equal(r.content[0]?.text, `error[${code}]: ${r.structuredContent?.message}`)
  if (message !== undefined) t.equal(r.structuredContent.message, message)
  return r.structuredContent
}

for (const mode of MODES) {
  t.test(`MCP over HTTP (${mode.name})`, async (t) => {
    const h = await startBurrow(mode.env)
    const mcp = await startMcp(h.burrow.service)
    t.teardown(async () => {
      await mcp.close(h)
    })
    const c = await mcp.client()

    t.test('lists the tools with their input schemas', async (t) => {
      const { tools } = await c.listTools()
      t.same(tools.map((x) => x.name).sort(), TOOLS)
      const byName = Object.fromEntries(tools.map((x) => [x.name, x]))
      for (const x of tools) t.ok((x.description ?? '').length > 40, `${x.name} is described`)
      const create = byName.session_create!.inputSchema as any
      t.same(
        Object.keys(create.properties).sort(),
        Object.keys(CreateSessionSchema.properties).sort(),
        'session_create mirrors CreateSession',
      )
      t.equal(create.additionalProperties, false)
      const turn = byName.turn_run!.inputSchema as any
      t.same(turn.required, ['session_id'])
      t.same(Object.keys(turn.properties).sort(), [
        'input',
        'max_tokens',
        'on_busy',
        'reasoning_effort',
        'response_format',
        'session_id',
        'stop',
        'temperature',
        'tool_choice',
        'tool_results',
        'top_p',
      ])
      t.same((byName.memory_search!.inputSchema as any).required, ['q'])
    })

    t.test('create, run a turn with progress, and the persistence tools', async (t) => {
      const created = await ok(t, c, 'session_create', { model: 'offline:echo', system_prompt: 'Be brief.', metadata: { team: 'mcp' } })
      t.match(created, { model: 'offline:echo', system_prompt: 'Be brief.', metadata: { team: 'mcp' }, status: 'active' })
      const id = created.session_id as string
      const input = Array.from({ length: 30 }, (_, i) => `word${i}`).join(' ')
      const progress: Progress[] = []
      const r = await call(c, 'turn_run', { session_id: id, input }, (p) => progress.push(p))
      t.notOk(r.isError)
      t.match(r.structuredContent, { session_id: id, turn: 1, status: 'completed', output_text: `echo: ${input}` })
      t.equal(r.content[0]!.text, `echo: ${input}`)
      t.ok(progress.length >= 2, `text arrives in several progress notifications (${progress.length})`)
      t.same(
        progress.map((p) => p.progress),
        progress.map((_, i) => i + 1),
        'progress increases',
      )
      t.equal(progress.at(-1)!.message, `echo: ${input}`, 'the last one carries the whole text')

      if (!mode.persistent) {
        const msg = ERROR_TABLE.SESSION_PERSISTENCE_DISABLED.message
        await fails(t, c, 'session_read', { session_id: id }, 'SESSION_PERSISTENCE_DISABLED', msg)
        await fails(t, c, 'session_list', {}, 'SESSION_PERSISTENCE_DISABLED', msg)
        await fails(t, c, 'session_archive', { session_id: id }, 'SESSION_PERSISTENCE_DISABLED', msg)
        await fails(t, c, 'session_resume', { session_id: id, input: 'again' }, 'SESSION_PERSISTENCE_DISABLED', msg)
        return
      }
      t.match(await ok(t, c, 'session_read', { session_id: id }), {
        session_id: id,
        turn_count: 1,
        status: 'active',
        messages: [{ role: 'user' }, { role: 'assistant' }],
      })
      t.match(await ok(t, c, 'session_resume', { session_id: id, input: 'again' }), { turn: 2, output_text: 'echo: again' })
      const page = await ok(t, c, 'session_list', { limit: 100 })
      t.ok(page.items.some((s: any) => s.session_id === id))
      t.same(await ok(t, c, 'session_archive', { session_id: id }), { session_id: id, status: 'archived' })
      t.equal((await ok(t, c, 'session_list', { status: 'archived' })).items[0].session_id, id)
      await fails(t, c, 'turn_run', { session_id: id, input: 'more' }, 'SESSION_ARCHIVED')
    })

    t.test('client tools: a turn pauses for tool results and continues', async (t) => {
      const { session_id: id } = await ok(t, c, 'session_create', { model: 'offline:echo', tools: [WEATHER] })
      const progress: Progress[] = []
      const paused = await call(c, 'turn_run', { session_id: id, input: '/tool get_weather {"city":"Oslo"}' }, (p) => progress.push(p))
      t.match(paused.structuredContent, { status: 'requires_action', tool_calls: [{ name: 'get_weather', input: { city: 'Oslo' } }] })
      t.match(paused.content[0]!.text, /get_weather/)
      t.ok(progress.some((p) => p.message === 'tool_call get_weather'))
      const callId = paused.structuredContent.tool_calls[0].id
      const done = await ok(t, c, 'turn_run', { session_id: id, tool_results: [{ tool_call_id: callId, content: '5C' }] })
      t.match(done, { turn: 1, status: 'completed', output_text: 'tool result: 5C' })
    })

    t.test('errors: unknown session, invalid arguments, disabled memory, unknown tool', async (t) => {
      await fails(t, c, 'turn_run', { session_id: randomUUID(), input: 'hi' }, 'SESSION_NOT_FOUND')
      t.match(await fails(t, c, 'turn_run', { session_id: 'nope', input: 'hi' }, 'INVALID_REQUEST'), { field: 'arguments/session_id' })
      t.match(await fails(t, c, 'turn_run', { input: 'hi' }, 'INVALID_REQUEST'), {
        field: 'arguments/session_id',
        message: 'arguments/session_id is required',
      })
      t.match(await fails(t, c, 'session_create', { bogus: 1 }, 'INVALID_REQUEST'), {
        field: 'arguments/bogus',
        message: 'arguments/bogus is not an allowed property',
      })
      t.match(await fails(t, c, 'session_create', { compaction: { recent_turn_budget: -1 } }, 'INVALID_REQUEST'), {
        field: 'arguments/compaction/recent_turn_budget',
      })
      const { session_id: id } = await ok(t, c, 'session_create', {})
      await fails(t, c, 'turn_run', { session_id: id }, 'INVALID_REQUEST') // the service's rule: input or tool_results
      await fails(t, c, 'memory_search', { q: 'anything' }, 'MEMORY_STORE_DISABLED', ERROR_TABLE.MEMORY_STORE_DISABLED.message)
      t.match(await ok(t, c, 'capabilities_get'), { session_store: mode.persistent, memory_store: false })
      await t.rejects(c.callTool({ name: 'no_such_tool', arguments: {} }), { code: -32602 }, 'an unknown tool is a JSON-RPC error')
    })

    t.test('HTTP: stateless POST only; a bad body is a JSON-RPC parse error', async (t) => {
      const get = await fetch(mcp.url, { headers: { accept: 'text/event-stream' } })
      t.equal(get.status, 405)
      t.equal(get.headers.get('allow'), 'POST')
      const bad = await fetch(mcp.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: '{nope',
      })
      t.equal(bad.status, 400)
      t.match(await bad.json(), { jsonrpc: '2.0', id: null, error: { code: -32700, data: { code: 'INVALID_REQUEST' } } })
      const list = await fetch(mcp.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      })
      t.equal(list.status, 200, 'no initialize needed in stateless mode')
      t.match(list.headers.get('content-type'), /text\/event-stream/)
      t.match(await list.text(), /session_create/)
    })
  })
}

t.test('MCP auth: API keys and tenants (mounted with the REST plugin)', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb', BURROW_API_KEYS: 'k1:a,k2:b' })
  const mcp = await startMcp(h.burrow.service, { withRest: true })
  t.teardown(() => mcp.close(h))
  const raw = (method: string, headers: Record<string, string>, body?: unknown) =>
    fetch(mcp.url, {
      method,
      body: body === undefined ? undefined : JSON.stringify(body),
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    })
  const init = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'x', version: '1' } },
  }
  const messages = [
    init,
    { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'session_create', arguments: { metadata: { who: 'intruder' } } } },
  ]

  await t.test('a missing or wrong key is 401 with WWW-Authenticate before any method runs', async (t) => {
    for (const [label, headers, challenge] of [
      ['no key', {}, 'Bearer realm="burrow"'],
      ['wrong key', { authorization: 'Bearer wrong' }, 'Bearer realm="burrow", error="invalid_token"'],
      ['not a bearer key', { authorization: 'Basic azE6' }, 'Bearer realm="burrow", error="invalid_token"'],
    ] as const) {
      for (const [method, body] of [
        ...messages.map((m) => ['POST', m] as const),
        ['GET', undefined] as const,
        ['DELETE', undefined] as const,
      ]) {
        const r = await raw(method, headers, body)
        const what = `${label}: ${method} ${(body as { method?: string } | undefined)?.method ?? ''}`
        t.equal(r.status, ERROR_TABLE.UNAUTHORIZED.http, what)
        t.equal(r.headers.get('www-authenticate'), challenge, what)
        t.same(
          await r.json(),
          {
            jsonrpc: '2.0',
            id: null,
            error: {
              code: ERROR_TABLE.UNAUTHORIZED.rpc,
              message: label === 'wrong key' ? 'Invalid API key.' : 'Missing API key: send Authorization: Bearer <key>.',
              data: { code: 'UNAUTHORIZED' },
            },
          },
          what,
        )
      }
    }
    const ctx = (apiKey: string) => ({ apiKey, requestId: 't' })
    t.same((await h.burrow.service.list({}, ctx('k1'))).items, [], 'nothing ran: no session was created for any tenant')
    t.same((await h.burrow.service.list({}, ctx('k2'))).items, [])
    // The official client cannot even initialize without a valid key.
    await t.rejects(mcp.client(), { code: 401 })
    await t.rejects(mcp.client('wrong'), { code: 401 })
  })

  await t.test('with a key: the official client works, scoped to its tenant', async (t) => {
    const [a, b] = await Promise.all([mcp.client('k1'), mcp.client('k2')])
    const { session_id: id } = await ok(t, a, 'session_create', { model: 'offline:echo' })
    t.equal((await ok(t, a, 'turn_run', { session_id: id, input: 'mine' })).output_text, 'echo: mine')
    await fails(t, b, 'turn_run', { session_id: id, input: 'theirs' }, 'SESSION_NOT_FOUND')
    await fails(t, b, 'session_read', { session_id: id }, 'SESSION_NOT_FOUND')
    await fails(t, b, 'session_archive', { session_id: id }, 'SESSION_NOT_FOUND')
    t.notOk((await ok(t, b, 'session_list', {})).items.some((s: any) => s.session_id === id))
    t.equal((await raw('GET', { authorization: 'Bearer k1' })).status, 405, 'authenticated GET: no standalone stream (stateless)')

    const post = (body: string, type: string) =>
      fetch(mcp.url, {
        method: 'POST',
        headers: { authorization: 'Bearer k1', 'content-type': type, accept: 'application/json, text/event-stream' },
        body,
      })
    for (const [body, type, code, field] of [
      ['{nope', 'application/json', -32700, 'body'],
      ['', 'application/json', -32700, 'body'],
      ['x=1', 'text/plain', ERROR_TABLE.INVALID_REQUEST.rpc, 'header/content-type'],
    ] as const) {
      const r = await post(body, type)
      t.equal(r.status, 400, `${type} ${JSON.stringify(body)}`)
      t.match(await r.json(), { jsonrpc: '2.0', id: null, error: { code, data: { code: 'INVALID_REQUEST', field } } })
    }
    const base = mcp.url.replace(/\/mcp$/, '')
    t.equal(
      (await fetch(`${base}/v1/sessions/${id}`, { headers: { authorization: 'Bearer k1' } })).status,
      200,
      'REST answers next to /mcp',
    )
    const rest = await fetch(`${base}/v1/sessions`, {
      method: 'POST',
      headers: { authorization: 'Bearer k1', 'content-type': 'application/json' },
      body: '{nope',
    })
    t.equal(rest.status, 400)
    t.match(rest.headers.get('content-type'), /problem\+json/, "REST keeps the app's error handler")
  })
})

t.test('MCP memory_search with the memory store', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb', BURROW_MEMORY_STORE: 'hnsw' })
  const mcp = await startMcp(h.burrow.service)
  t.teardown(() => mcp.close(h))
  const c = await mcp.client()
  await h.burrow.service.addMemory([{ content: 'The staging database password rotates every Friday.' }, { content: 'Lunch is at noon.' }], {
    requestId: 't',
  })
  const r = await ok(t, c, 'memory_search', { q: 'when does the staging password change?', limit: 1 })
  t.equal(r.results.length, 1)
  t.match(r.results[0], { content: /rotates every Friday/ })
  t.match(await fails(t, c, 'memory_search', { q: 'x', limit: 50 }, 'INVALID_REQUEST'), { field: 'arguments/limit' })
})

t.test('MCP with a slow provider: streaming progress, SESSION_BUSY, cancellation', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb' }, { fake: true })
  const mcp = await startMcp(h.burrow.service)
  t.teardown(() => mcp.close(h))
  const c = await mcp.client()
  const model = 'openai:gpt-4o-mini'
  const { session_id: id } = await ok(t, c, 'session_create', { model })
  h.fake.enqueue({ text: 'slow slow slow slow slow', chunkSize: 2, delayMs: 30 })
  let finished = false
  const progress: Array<Progress & { before: boolean }> = []
  const first = call(c, 'turn_run', { session_id: id, input: 'slow one' }, (p) => progress.push({ ...p, before: !finished })).finally(
    () => {
      finished = true
    },
  )
  await eventually(() => progress.length > 0)
  await fails(t, c, 'turn_run', { session_id: id, input: 'too soon' }, 'SESSION_BUSY')
  const r = await first
  t.equal(r.structuredContent.output_text, 'slow slow slow slow slow')
  t.ok(progress.length >= 3 && progress.every((p) => p.before), 'progress streamed while the turn ran')

  // Over stateless HTTP neither a cancellation (it reaches another server) nor a disconnect stops the turn.
  h.fake.enqueue({ text: 'steady '.repeat(10), chunkSize: 10, delayMs: 20 })
  const gone = await mcp.client()
  let closing: Promise<void> | undefined
  const dropped = call(gone, 'turn_run', { session_id: id, input: 'hang up' }, () => {
    closing ??= gone.close()
  })
  await t.rejects(dropped)
  await closing
  const ctx = { requestId: 't' }
  await eventually(
    async () => (await h.burrow.service.listEvents(id, { after: 0, limit: 100 }, ctx)).events.at(-1)?.type === 'turn_completed',
  )
  t.equal((await h.burrow.service.read(id, ctx)).turn_count, 2)

  // Over a connected transport (stdio, here in memory) a cancelled call interrupts its turn.
  const server = createMcpServer(h.burrow.service, () => ({ requestId: 'mem' }))
  const [ct, st] = InMemoryTransport.createLinkedPair()
  const mem = new Client({ name: 'mem', version: '1' })
  await Promise.all([server.connect(st), mem.connect(ct)])
  t.teardown(() => mem.close())
  h.fake.enqueue({ text: 'long '.repeat(60), chunkSize: 5, delayMs: 50 })
  const abort = new AbortController()
  const cancelled = mem.callTool({ name: 'turn_run', arguments: { session_id: id, input: 'long one' } }, undefined, {
    signal: abort.signal,
    onprogress: () => abort.abort('changed my mind'),
  })
  await t.rejects(cancelled)
  // `running` turns false when the turn's last event is emitted; the event list shows it once durable.
  await eventually(async () => !(await h.burrow.service.read(id, ctx)).running, 2000)
  await eventually(
    async () => (await h.burrow.service.listEvents(id, { after: 0, limit: 100 }, ctx)).events.at(-1)?.type === 'turn_failed',
    2000,
  )
  const events = (await h.burrow.service.listEvents(id, { after: 0, limit: 100 }, ctx)).events
  t.match(events.at(-1), { type: 'turn_failed', turn: 3, data: { code: 'INTERRUPTED' } })
  h.fake.enqueue({ text: 'back' })
  t.equal((await ok(t, c, 'turn_run', { session_id: id, input: 'again' })).output_text, 'back')
})

t.test('createMcpServer in memory, and runMcpStdio on streams', async (t) => {
  const h = await startBurrow({})
  t.teardown(() => h.close())
  const server = createMcpServer(h.burrow.service, () => ({ requestId: 'mem' }))
  const [ct, st] = InMemoryTransport.createLinkedPair()
  const c = new Client({ name: 'mem', version: '1' })
  await Promise.all([server.connect(st), c.connect(ct)])
  t.teardown(() => c.close())
  const { session_id: id } = await ok(t, c, 'session_create', {})
  const progress: Progress[] = []
  t.equal(
    (await call(c, 'turn_run', { session_id: id, input: 'in memory' }, (p) => progress.push(p))).structuredContent.output_text,
    'echo: in memory',
  )
  t.equal(progress.at(-1)?.message, 'echo: in memory')

  // stdio: requests piped in, stdin ends at once; the turn still answers before runMcpStdio resolves.
  const stdin = new PassThrough()
  const stdout = new PassThrough()
  let out = ''
  stdout.on('data', (d) => {
    out += String(d)
  })
  const running = runMcpStdio(h.burrow.service, {}, { stdin, stdout })
  const send = (m: object) => stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...m })}\n`)
  send({
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'pipe', version: '1' } },
  })
  send({ method: 'notifications/initialized' })
  send({ id: 2, method: 'tools/call', params: { name: 'turn_run', arguments: { session_id: id, input: 'piped' } } })
  stdin.end()
  await running
  const lines = out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
  t.equal(lines.find((m) => m.id === 1)?.result.serverInfo.name, 'burrow')
  t.match(lines.find((m) => m.id === 2)?.result.structuredContent, { turn: 2, output_text: 'echo: piped' })
})
