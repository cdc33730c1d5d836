// Random and malformed requests against REST, /rpc and /mcp of a real server, on raw sockets
// (so nothing is cleaned up on the way): never a 5xx, never a connection left without an
// answer, and every error body inside the contract — a problem document of the table (REST)
// or JSON-RPC errors with the table's number and data.code (/rpc, /mcp); successes match the
// OpenAPI document. Bounded runs with a fixed seed (override: FUZZ_SEED=<n>); on failure
// fast-check prints the seed and the shrunk request.
import t from 'tap'
import fc from 'fast-check'
import { ERROR_TABLE, isErrorCode } from '../../src/core/errors.js'
import { protocolRequest, render, restRequest, type FuzzRequest, type FuzzWorld } from '../helpers/fuzz-requests.js'
import { startBurrow } from '../helpers/harness.js'
import { checkResponse } from '../helpers/openapi-check.js'
import { problemFaults, rpcErrorFaults, rpcResponseFaults } from '../helpers/problem-check.js'
import { rawRequest, type RawResponse } from '../helpers/raw-http.js'
import { rounds } from '../helpers/thoroughness.js'

const SEED = Number(process.env.FUZZ_SEED ?? 20261124)
// The same seed's first requests in npm test; all of them in npm run test:full.
const RUNS = { rest: rounds(100, 300), rpc: rounds(70, 200), mcp: rounds(70, 200) }
const KEY = 'fuzz-key-0123'
const LIMIT = 32 * 1024

/** What is wrong with the answer to `req` (empty: within the contract). */
function faults(req: FuzzRequest, res: RawResponse): string[] {
  if (res.end === 'timeout' || res.end.startsWith('error')) return [`no complete answer (${res.end}): ${res.raw.slice(0, 200)}`]
  if (res.status === 0) return [`not an HTTP response: ${JSON.stringify(res.raw.slice(0, 200))}`]
  if (res.status >= 500) return [`${res.status}: ${res.body.slice(0, 300)}`]
  const type = res.headers['content-type'] ?? ''
  const path = req.path.split('?')[0]!
  const protocol = path === '/rpc' || path === '/mcp'
  if (req.method === 'HEAD' || res.status === 204 || res.status === 202) return res.body === '' ? [] : [`${res.status} with a body`]
  if (res.status === 401 && !res.headers['www-authenticate']) return ['401 without WWW-Authenticate']
  if (res.status >= 400) {
    if (type.startsWith('application/problem+json')) return problemFaults(res.status, type, res.body)
    if (protocol && type.startsWith('application/json')) return refusalFaults(path, res)
    return [`an error outside the contract: ${res.status} ${type} ${res.body.slice(0, 200)}`]
  }
  if (path === '/rpc' && req.method === 'POST')
    return type.startsWith('application/json') ? rpcResponseFaults(parse(res.body)) : [`/rpc answered ${type}`]
  if (path === '/mcp' && req.method === 'POST') return mcpStreamFaults(type, res.body)
  if (type.startsWith('text/event-stream')) return []
  const bad = checkResponse(req.method, path, res.status, type, type.includes('json') ? parse(res.body) : res.body)
  return bad ? [bad] : []
}

/** /rpc and /mcp refusals: one JSON-RPC error with id null, under its table row's status (/mcp's 405 is MCP's). */
function refusalFaults(path: string, res: RawResponse): string[] {
  const body = parse(res.body) as any
  const out = rpcResponseFaults(body)
  const code = body?.error?.data?.code
  if (body?.id !== null) out.push('a refusal has id null')
  const mcp405 = path === '/mcp' && res.status === 405 && code === 'ROUTE_NOT_FOUND'
  if (isErrorCode(code) && res.status !== ERROR_TABLE[code].http && !mcp405) out.push(`status ${res.status} is not ${code}'s`)
  return out
}

/** /mcp answers: SSE events of JSON-RPC messages; errors and tool errors on the table. */
function mcpStreamFaults(type: string, text: string): string[] {
  if (!type.startsWith('text/event-stream')) return [`/mcp answered ${type}`]
  const out: string[] = []
  for (const block of text.split('\n\n').filter((b) => b.trim() !== '')) {
    const data = block
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6))
      .join('\n')
    const m = parse(data) as any
    if (m?.jsonrpc !== '2.0') {
      out.push(`not a JSON-RPC message: ${data.slice(0, 200)}`)
      continue
    }
    if (m.error !== undefined) out.push(...rpcErrorFaults(m.error))
    if (m.result?.isError) {
      const code = m.result.structuredContent?.code
      if (!isErrorCode(code) || code === 'INTERNAL') out.push(`tool error ${JSON.stringify(m.result).slice(0, 200)}`)
    }
  }
  return out
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return `<not JSON: ${text.slice(0, 100)}>`
  }
}

t.test('fuzz: REST, /rpc and /mcp answer every request within the contract', async (t) => {
  const h = await startBurrow({
    BURROW_SESSION_STORE: 'lmdb',
    BURROW_MEMORY_STORE: 'hnsw',
    BURROW_COMPACTION: 'on',
    BURROW_DURABILITY: 'relaxed',
    BURROW_API_KEYS: `${KEY}:fuzz`,
    BURROW_BODY_LIMIT_BYTES: String(LIMIT),
  })
  t.teardown(() => h.close())
  const sessions = [await h.api.createSession({}, { token: KEY }), await h.api.createSession({}, { token: KEY })]
  const world: FuzzWorld = { key: KEY, sessions, bodyLimit: LIMIT }
  t.comment(`seed ${SEED}`)

  const run = async (name: string, arb: fc.Arbitrary<FuzzRequest>, numRuns: number) => {
    const stats = new Map<string, number>()
    await fc.assert(
      fc.asyncProperty(arb, async (req) => {
        const res = await rawRequest(h.url, render(req), {
          stopAfterHeaders: (status, headers) =>
            status === 200 && /^text\/event-stream/.test(headers['content-type'] ?? '') && !req.path.startsWith('/mcp'),
        })
        const b = parse(res.body) as any
        const what = res.status >= 400 ? `${res.status} ${String(b?.code ?? b?.error?.data?.code ?? '')}`.trim() : String(res.status)
        stats.set(what, (stats.get(what) ?? 0) + 1)
        const wrong = faults(req, res)
        if (wrong.length > 0)
          throw new Error(`${wrong.join('; ')}\nrequest: ${JSON.stringify(render(req).toString('latin1').slice(0, 600))}`)
      }),
      { seed: SEED, numRuns, endOnFailure: false },
    )
    t.pass(
      `${name}: ${numRuns} requests, statuses ${JSON.stringify(Object.fromEntries([...stats].sort((a, b) => a[0].localeCompare(b[0]))))}`,
    )
  }
  await run('REST', restRequest(world), RUNS.rest)
  await run('/rpc', protocolRequest(world, '/rpc'), RUNS.rpc)
  await run('/mcp', protocolRequest(world, '/mcp'), RUNS.mcp)

  t.equal((await h.api.get('/healthz')).status, 200, 'the server lives on')
  t.same(
    h.logs.filter((l) => l.level >= 50).map((l) => `${l.msg}: ${l.err?.message ?? ''}`),
    [],
    'nothing was an internal error',
  )
})
