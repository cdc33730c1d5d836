// fast-check arbitraries of HTTP requests for the fuzz tests: real routes with random and
// malformed segments, queries, headers (control characters included) and bodies (JSON of
// random shapes and depths, truncated JSON, huge numbers, unicode, wrong content types,
// bodies over the limit), rendered as raw HTTP/1.1 bytes.
import fc from 'fast-check'
import { readFileSync } from 'node:fs'
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js'
import { RPC_METHODS } from '../../src/surfaces/rpc/rpc-methods.js'

export interface FuzzRequest {
  method: string
  path: string
  headers: Array<[string, string]>
  body: string | undefined
}

export interface FuzzWorld {
  /** A valid API key, and ids of sessions that exist (some random ids are used too). */
  key: string
  sessions: string[]
  /** The body limit, so some bodies can go over it. */
  bodyLimit: number
}

const doc = JSON.parse(readFileSync(new URL('../../openapi/openapi.json', import.meta.url), 'utf8')) as {
  paths: Record<string, Record<string, unknown>>
}
/** Every REST route of the OpenAPI document, as [method, template]. */
export const REST_ROUTES: Array<[string, string]> = Object.entries(doc.paths)
  .filter(([p]) => p !== '/rpc')
  .flatMap(([p, ops]) => Object.keys(ops).map((m) => [m.toUpperCase(), p] as [string, string]))

export const MCP_TOOLS = [
  'session_create',
  'turn_run',
  'session_resume',
  'session_read',
  'session_list',
  'session_archive',
  'memory_search',
  'capabilities_get',
]

// ---- text ------------------------------------------------------------------------------

const PERCENT_JUNK = ['%', '%E0%A4%A', '%zz', '%00', '%2F', '%C0%AF', '%FF%FE', '%25', '..', '.', '%0D%0A']
const junkText = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.constantFrom(...PERCENT_JUNK, '', ' ', '\u0000', '💥', 'ﬀ', '\ud800'),
  fc.integer({ min: 50, max: 12_000 }).map((n) => 'a'.repeat(n)),
)
/** A path segment as it goes on the request line: encoded, raw (unicode bytes) or percent junk. */
const segment = fc.oneof(
  { weight: 3, arbitrary: junkText.map((s) => encodeURIComponent(s.replace(/[\ud800-\udfff]/g, 'x'))) },
  { weight: 1, arbitrary: fc.constantFrom(...PERCENT_JUNK) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 6 }).map((s) => s.replace(/[\s/?#%\\]/g, '')) },
)
const hugeNumber = fc.constantFrom(
  '1e309',
  '-1e309',
  '123456789012345678901234567890',
  '-0',
  '0.0000001',
  '1e-400',
  '9007199254740993',
  '-1',
  '0',
  '1.5',
)

// ---- JSON ------------------------------------------------------------------------------

/** `levels` nested arrays or objects around `inner`, as text. */
const nest = (levels: number, kind: 'array' | 'object', inner = '1') =>
  kind === 'array' ? `${'['.repeat(levels)}${inner}${']'.repeat(levels)}` : `${'{"a":'.repeat(levels)}${inner}${'}'.repeat(levels)}`
const deepJson = fc
  .tuple(fc.constantFrom(20, 65, 129, 1000, 20_000), fc.constantFrom('array', 'object') as fc.Arbitrary<'array' | 'object'>)
  .map(([n, k]) => nest(n, k))
/** JSON text: values of random shapes, deep nesting, huge numbers, escapes of lone surrogates. */
export const jsonText: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: deepJson },
  { weight: 1, arbitrary: hugeNumber },
  {
    weight: 1,
    arbitrary: fc.constantFrom('"\\ud800"', '"\\udfff\\ud800"', '"\\u0000"', '"💥"', '{"a":"\\ud83d"}', 'null', 'true', '[]', '{}'),
  },
)

/** An object whose keys come from `fields` (each with its own value arbitrary) and sometimes a junk key. */
function objectOf(fields: Record<string, fc.Arbitrary<string>>): fc.Arbitrary<string> {
  const entries = Object.entries(fields)
  return fc
    .tuple(fc.subarray(entries), fc.option(fc.tuple(junkText, jsonText), { freq: 5 }))
    .chain(([chosen, junk]) =>
      fc
        .tuple(...chosen.map(([k, arb]) => arb.map((v) => `${JSON.stringify(k)}:${v}`)))
        .map((parts) => `{${[...parts, ...(junk ? [`${JSON.stringify(junk[0])}:${junk[1]}`] : [])].join(',')}}`),
    )
}

const str = (arb: fc.Arbitrary<string>) => arb.map((s) => JSON.stringify(s))
const anyOr = (arb: fc.Arbitrary<string>) => fc.oneof({ weight: 3, arbitrary: arb }, { weight: 1, arbitrary: jsonText })
const model = anyOr(str(fc.constantFrom('offline:echo', 'offline:nope', 'nosuch:model', 'no-prefix', '')))
const schemaText = fc.oneof(
  fc.constant('{"type":"object","properties":{"city":{"type":"string"}}}'),
  deepJson.map((d) => `{"type":"object","properties":${d}}`),
  jsonText,
)
const tools = fc
  .array(
    objectOf({
      name: anyOr(str(fc.constantFrom('get_weather', 'x', 'bad name!', 'memory_search'))),
      description: anyOr(str(junkText)),
      input_schema: schemaText,
    }),
    { maxLength: 3 },
  )
  .map((ts) => `[${ts.join(',')}]`)
const metadata = anyOr(fc.dictionary(junkText, junkText, { maxKeys: 4 }).map((m) => JSON.stringify(m)))
const input = anyOr(
  fc.oneof(str(junkText), str(fc.constant('/tool get_weather {"city":"Oslo"}')), fc.constant('[{"type":"text","text":"hi"}]')),
)
const toolResults = anyOr(
  fc
    .array(objectOf({ tool_call_id: anyOr(str(junkText)), content: anyOr(str(junkText)), is_error: anyOr(fc.constant('true')) }), {
      maxLength: 2,
    })
    .map((a) => `[${a.join(',')}]`),
)
const int = anyOr(fc.oneof(fc.integer({ min: -5, max: 300_000 }).map(String), hugeNumber))

const createSession = objectOf({
  model,
  system_prompt: anyOr(str(junkText)),
  metadata,
  memory: anyOr(fc.constant('true')),
  tools,
  compaction: anyOr(objectOf({ auto_compact_threshold: int, recent_turn_budget: int, max_summary_tokens: int })),
  max_total_tokens: int,
})
const startTurn = objectOf({ input, tool_results: toolResults, max_tokens: int })

/** A body for a REST route, shaped after it (or not). */
export function restBody(template: string, world: FuzzWorld): fc.Arbitrary<string | undefined> {
  const shaped =
    template === '/v1/sessions'
      ? createSession
      : template.endsWith('/turns') || template.endsWith('/resume')
        ? startTurn
        : template === '/v1/memory'
          ? fc.array(objectOf({ content: anyOr(str(junkText)), metadata }), { maxLength: 3 }).map((a) => `[${a.join(',')}]`)
          : template.endsWith('{key}')
            ? objectOf({ value: anyOr(str(junkText)) })
            : jsonText
  return bodyOf(shaped, world)
}

/** Mostly the shaped body; sometimes truncated, not JSON, empty, absent or over the limit. */
function bodyOf(shaped: fc.Arbitrary<string>, world: FuzzWorld): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { weight: 8, arbitrary: shaped },
    { weight: 2, arbitrary: fc.tuple(shaped, fc.nat()).map(([s, n]) => s.slice(0, n % Math.max(1, s.length))) },
    { weight: 1, arbitrary: junkText },
    { weight: 1, arbitrary: fc.constantFrom(undefined, '', '   ') },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 3 }).map((k) => `{"system_prompt":"${'x'.repeat(k * world.bodyLimit)}"}`) },
  )
}

// ---- JSON-RPC and MCP messages -----------------------------------------------------------

const rpcId = fc.oneof(fc.integer().map(String), str(junkText), fc.constantFrom('null', '{}', '[]', '1.5', 'true'), hugeNumber)
const sessionIdOf = (world: FuzzWorld) =>
  fc.oneof(fc.constantFrom(...world.sessions), fc.uuid({ version: 7 }), junkText).map((s) => JSON.stringify(s))

/** Mostly a well-formed request or notification (the checks behind the envelope get their turn), sometimes any subset. */
function envelope(method: fc.Arbitrary<string>, params: fc.Arbitrary<string>): fc.Arbitrary<string> {
  const id = fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 0, max: 99 }).map(String) }, { weight: 1, arbitrary: rpcId })
  return fc.oneof(
    {
      weight: 5,
      arbitrary: fc
        .tuple(fc.option(id, { freq: 6 }), method, fc.option(params, { freq: 8 }))
        .map(([i, m, p]) => `{"jsonrpc":"2.0",${i === null ? '' : `"id":${i},`}"method":${m}${p === null ? '' : `,"params":${p}`}}`),
    },
    { weight: 1, arbitrary: objectOf({ jsonrpc: fc.oneof(fc.constant('"2.0"'), jsonText), id: rpcId, method, params }) },
  )
}
const batchOf = (one: fc.Arbitrary<string>) =>
  fc.oneof({ weight: 4, arbitrary: one }, { weight: 1, arbitrary: fc.array(one, { maxLength: 4 }).map((a) => `[${a.join(',')}]`) })

/** A JSON-RPC payload for `/rpc`: envelopes of the method table (params shaped after them, or not), batches. */
export function rpcBody(world: FuzzWorld): fc.Arbitrary<string | undefined> {
  const sid = sessionIdOf(world)
  const params = fc.oneof(
    createSession,
    startTurn.chain((t) => sid.map((s) => t.replace(/^\{/, `{"session_id":${s}${t === '{}' ? '' : ','}`))),
    objectOf({
      session_id: sid,
      key: anyOr(str(junkText)),
      value: anyOr(str(junkText)),
      after: int,
      limit: int,
      idempotency_key: anyOr(str(junkText)),
    }),
    jsonText,
  )
  const method = fc
    .oneof({ weight: 4, arbitrary: fc.constantFrom(...Object.keys(RPC_METHODS)) }, { weight: 1, arbitrary: junkText })
    .map((m) => JSON.stringify(m))
  return bodyOf(batchOf(envelope(method, params)), world)
}

/** An MCP payload for `/mcp`: initialize, tools/call of every tool (arguments shaped or not), other methods, batches. */
export function mcpBody(world: FuzzWorld): fc.Arbitrary<string | undefined> {
  const sid = sessionIdOf(world)
  const args = fc.oneof(
    createSession,
    startTurn.chain((t) => sid.map((s) => t.replace(/^\{/, `{"session_id":${s}${t === '{}' ? '' : ','}`))),
    objectOf({
      session_id: sid,
      q: anyOr(str(junkText)),
      limit: int,
      cursor: anyOr(str(junkText)),
      scope: anyOr(str(fc.constantFrom('session', 'tenant'))),
    }),
    jsonText,
  )
  const meta = anyOr(objectOf({ progressToken: anyOr(fc.oneof(str(junkText), fc.integer().map(String))) }))
  const toolCall = envelope(
    fc.constant('"tools/call"'),
    objectOf({ name: anyOr(str(fc.constantFrom(...MCP_TOOLS, 'nope'))), arguments: args, _meta: meta }),
  )
  const init = envelope(
    fc.constant('"initialize"'),
    objectOf({
      protocolVersion: anyOr(str(fc.constantFrom(LATEST_PROTOCOL_VERSION, '1999-01-01'))),
      capabilities: jsonText,
      clientInfo: anyOr(fc.constant('{"name":"fuzz","version":"1"}')),
    }),
  )
  const other = envelope(
    fc
      .constantFrom(
        'tools/list',
        'ping',
        'notifications/initialized',
        'notifications/cancelled',
        'resources/list',
        'prompts/list',
        'completion/complete',
        'logging/setLevel',
        'tasks/get',
        'nope',
      )
      .map((m) => JSON.stringify(m)),
    anyOr(objectOf({ cursor: anyOr(str(junkText)), _meta: meta, requestId: rpcId })),
  )
  const response = objectOf({ jsonrpc: fc.constant('"2.0"'), id: rpcId, result: jsonText })
  return bodyOf(
    batchOf(
      fc.oneof(
        { weight: 3, arbitrary: toolCall },
        { weight: 1, arbitrary: init },
        { weight: 2, arbitrary: other },
        { weight: 1, arbitrary: response },
      ),
    ),
    world,
  )
}

// ---- requests ----------------------------------------------------------------------------

/** Header values without line feeds (which would reframe the request); sometimes with control characters and bytes past ASCII. */
const headerJunk = fc.oneof(
  { weight: 6, arbitrary: fc.string({ maxLength: 40 }) },
  {
    weight: 1,
    arbitrary: fc
      .string({ maxLength: 40, unit: fc.integer({ min: 0, max: 0xff }).map((c) => String.fromCharCode(c)) })
      .map((s) => s.replace(/\n/g, '')),
  },
)
const headerName = fc.oneof(
  fc.constantFrom('x-junk', 'x-forwarded-for', 'cookie', 'expect', 'accept-version', 'if-none-match'),
  headerJunk.map((s) => s.replace(/[:\r]/g, '') || 'x'),
)

export function headers(world: FuzzWorld, mcp: boolean): fc.Arbitrary<Array<[string, string]>> {
  const auth = fc.oneof(
    { weight: 8, arbitrary: fc.constant(`Bearer ${world.key}`) },
    { weight: 1, arbitrary: fc.constantFrom('Bearer wrong', 'Basic Zm9vOmJhcg==', 'Bearer', '') },
  )
  const known = fc.record(
    {
      'content-type': fc.oneof(
        { weight: 6, arbitrary: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'APPLICATION/JSON') },
        {
          weight: 1,
          arbitrary: fc.constantFrom(
            'text/plain',
            'application/x-www-form-urlencoded',
            'multipart/form-data; boundary=x',
            'application/json-rpc',
            'application/json; charset=latin1',
            '',
          ),
        },
      ),
      accept: mcp
        ? fc.oneof(
            { weight: 8, arbitrary: fc.constant('application/json, text/event-stream') },
            { weight: 1, arbitrary: fc.constantFrom('application/json', 'text/event-stream', '*/*') },
          )
        : fc.constantFrom('*/*', 'application/json', 'text/event-stream'),
      authorization: auth,
      'idempotency-key': fc.oneof(fc.string({ maxLength: 20 }), fc.constant('k'.repeat(256))),
      'last-event-id': fc.oneof(fc.nat().map(String), hugeNumber, headerJunk),
      'mcp-protocol-version': fc.oneof(
        { weight: 6, arbitrary: fc.constantFrom(LATEST_PROTOCOL_VERSION, '2025-03-26') },
        { weight: 1, arbitrary: fc.constantFrom('1999-01-01', '') },
      ),
      'x-request-id': fc.oneof(fc.constantFrom('fuzz-1', 'a'.repeat(200)), headerJunk),
    },
    { requiredKeys: mcp ? ['authorization', 'accept', 'content-type'] : ['authorization', 'content-type'] },
  )
  return fc
    .tuple(known, fc.array(fc.tuple(headerName, headerJunk), { maxLength: 1 }))
    .map(([k, extra]) => [...(Object.entries(k) as Array<[string, string]>), ...extra])
}

function fill(template: string, world: FuzzWorld): fc.Arbitrary<string> {
  const parts = template
    .split('/')
    .map((p) =>
      p === '{id}'
        ? fc.oneof(
            { weight: 3, arbitrary: fc.constantFrom(...world.sessions) },
            { weight: 1, arbitrary: fc.uuid() },
            { weight: 2, arbitrary: segment },
          )
        : p === '{key}'
          ? fc.oneof(fc.constantFrom('k', 'deadline', 'a.b:c-d_e'), segment)
          : fc.constant(p),
    )
  return fc.tuple(...parts).map((ps) => ps.join('/'))
}

const query = fc
  .array(
    fc.tuple(
      fc.oneof(fc.constantFrom('after', 'limit', 'cursor', 'status', 'q', 'scope', 'session_id', 'access_token'), segment),
      fc.oneof(hugeNumber, segment, fc.constantFrom('active', 'tenant', 'x')),
    ),
    { maxLength: 3 },
  )
  .map((qs) => (qs.length === 0 ? '' : `?${qs.map(([k, v]) => `${k}=${v}`).join('&')}`))

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS']

/** A request to a REST route: mostly the route's own method, path filled with real ids or junk. */
export function restRequest(world: FuzzWorld): fc.Arbitrary<FuzzRequest> {
  return fc.constantFrom(...REST_ROUTES).chain(([method, template]) =>
    fc.record({
      method: fc.oneof({ weight: 6, arbitrary: fc.constant(method) }, { weight: 1, arbitrary: fc.constantFrom(...METHODS) }),
      path: fc.tuple(fill(template, world), query, fc.constantFrom('', '', '', '/', '//x')).map(([p, q, tail]) => `${p}${tail}${q}`),
      headers: headers(world, false),
      body: restBody(template, world),
    }),
  )
}

/** A request to `/rpc` or `/mcp`. */
export function protocolRequest(world: FuzzWorld, path: '/rpc' | '/mcp'): fc.Arbitrary<FuzzRequest> {
  return fc.record({
    method: fc.oneof({ weight: 12, arbitrary: fc.constant('POST') }, { weight: 1, arbitrary: fc.constantFrom(...METHODS) }),
    path: fc
      .tuple(fc.constant(path), fc.oneof({ weight: 6, arbitrary: fc.constant('') }, { weight: 1, arbitrary: query }))
      .map(([p, q]) => p + q),
    headers: headers(world, path === '/mcp'),
    body: path === '/rpc' ? rpcBody(world) : mcpBody(world),
  })
}

/** The request as bytes: the head (with `connection: close` and the body's length) and the body. */
export function render(r: FuzzRequest): Buffer {
  const body = r.body === undefined ? undefined : Buffer.from(r.body, 'utf8')
  const lines = [`${r.method} ${r.path} HTTP/1.1`, 'host: 127.0.0.1', 'connection: close', ...r.headers.map(([k, v]) => `${k}: ${v}`)]
  if (body) lines.push(`content-length: ${body.length}`)
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), body ?? Buffer.alloc(0)])
}
