// One schema and one validator behind every surface: the same bad request gets INVALID_REQUEST
// with the same field and message over REST, JSON-RPC and MCP — only the field's root differs
// (`body/…` or `querystring/…`, `params/…`, `arguments/…`).
import t from 'tap'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { startBurrow } from '../helpers/harness.js'

interface Refusal {
  code: unknown
  field: unknown
  message: unknown
}

/** One bad request as each surface spells it. */
interface Case {
  label: string
  rest: { method: 'GET' | 'POST'; path: (id: string) => string; body?: unknown }
  rpc: [method: string, params: (id: string) => Record<string, unknown>]
  mcp: [tool: string, args: (id: string) => Record<string, unknown>]
}

const LONG_KEY = 'k'.repeat(129)
const create = (body: Record<string, unknown>): Pick<Case, 'rest' | 'rpc' | 'mcp'> => ({
  rest: { method: 'POST', path: () => '/v1/sessions', body },
  rpc: ['session/create', () => body],
  mcp: ['session_create', () => body],
})
const turn = (body: Record<string, unknown>): Pick<Case, 'rest' | 'rpc' | 'mcp'> => ({
  rest: { method: 'POST', path: (id) => `/v1/sessions/${id}/turns`, body },
  rpc: ['turn/start', (id) => ({ session_id: id, ...body })],
  mcp: ['turn_run', (id) => ({ session_id: id, ...body })],
})
const search = (q: Record<string, string | number>): Pick<Case, 'rest' | 'rpc' | 'mcp'> => ({
  rest: {
    method: 'GET',
    path: () => `/v1/memory/search?${new URLSearchParams(Object.entries(q).map(([k, v]): [string, string] => [k, String(v)]))}`,
  },
  rpc: ['memory/search', () => q],
  mcp: ['memory_search', () => q],
})

const CASES: Case[] = [
  { label: 'an unknown property', ...create({ bogus: 1 }) },
  { label: 'a negative compaction setting', ...create({ compaction: { recent_turn_budget: -1 } }) },
  { label: 'a model that is not provider:model', ...create({ model: 'no-colon' }) },
  { label: 'a metadata value that is not a string', ...create({ metadata: { team: 7 } }) },
  { label: 'a metadata key over 128 characters', ...create({ metadata: { [LONG_KEY]: 'x' } }) },
  { label: 'a client tool without input_schema', ...create({ tools: [{ name: 'get_weather' }] }) },
  { label: 'max_tokens 0', ...turn({ input: 'hi', max_tokens: 0 }) },
  { label: 'an empty tool_results list', ...turn({ tool_results: [] }) },
  { label: 'a content block of an unknown type', ...turn({ input: [{ type: 'video', url: 'x' }] }) },
  { label: 'a search without q', ...search({ limit: 3 }) },
  { label: 'a search limit over 20', ...search({ q: 'x', limit: 21 }) },
]

const ROOT = /^(body|querystring|params|arguments)(?=\/|$)/
const unrooted = (r: Refusal) => ({
  code: r.code,
  field: typeof r.field === 'string' ? r.field.replace(ROOT, '') : r.field,
  message: typeof r.message === 'string' ? r.message.replace(ROOT, '') : r.message,
})

t.test('the same bad request is refused alike on REST, JSON-RPC and MCP', async (t) => {
  const h = await startBurrow({})
  const mcp = new Client({ name: 'validation-test', version: '1' })
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${h.url}/mcp`)))
  t.teardown(async () => {
    await mcp.close()
    await h.close()
  })
  const id = await h.api.createSession()

  for (const c of CASES) {
    const rest = await h.api.call(c.rest.method, c.rest.path(id), c.rest.body === undefined ? {} : { body: c.rest.body })
    t.equal(rest.status, 400, `${c.label}: REST 400`)
    const rpc = await h.api.post('/rpc', { jsonrpc: '2.0', id: 1, method: c.rpc[0], params: c.rpc[1](id) })
    const tool = (await mcp.callTool({ name: c.mcp[0], arguments: c.mcp[1](id) })) as { isError?: boolean; structuredContent?: any }
    t.equal(tool.isError, true, `${c.label}: MCP tool error`)

    const answers: Array<[string, Refusal]> = [
      ['rest', { code: rest.body.code, field: rest.body.field, message: rest.body.detail }],
      ['rpc', { code: rpc.body.error?.data?.code, field: rpc.body.error?.data?.field, message: rpc.body.error?.message }],
      ['mcp', { code: tool.structuredContent?.code, field: tool.structuredContent?.field, message: tool.structuredContent?.message }],
    ]
    const [, ref] = answers[0]!
    t.equal(ref.code, 'INVALID_REQUEST', `${c.label}: INVALID_REQUEST`)
    t.type(ref.field, 'string', `${c.label}: names a field (${String(ref.field)})`)
    t.notMatch(String(ref.message), LONG_KEY, `${c.label}: does not echo a long key`)
    for (const [name, r] of answers.slice(1)) t.same(unrooted(r), unrooted(ref), `${c.label}: ${name} answers as REST (${String(r.field)})`)
  }
})
