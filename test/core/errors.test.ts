import t from 'tap'
import { readFileSync } from 'node:fs'
import { BurrowError, ERROR_CODES, ERROR_TABLE, isErrorCode, toBurrowError } from '../../src/core/errors.js'

// The product's original error table (HTTP statuses), written out so a change to either side fails here.
const CONTRACT: Record<string, number> = {
  SESSION_PERSISTENCE_DISABLED: 501,
  SESSION_COMPACTION_DISABLED: 501,
  MEMORY_STORE_DISABLED: 501,
  INVALID_REQUEST: 400,
  UNAUTHORIZED: 401,
  SESSION_NOT_FOUND: 404,
  SESSION_BUSY: 409,
  SESSION_ARCHIVED: 409,
  IDEMPOTENCY_CONFLICT: 422,
  PAYLOAD_TOO_LARGE: 413,
  RATE_LIMITED: 429,
  BUDGET_EXCEEDED: 429,
  PROVIDER_NOT_CONFIGURED: 503,
  PROVIDER_ERROR: 502,
  PROVIDER_TIMEOUT: 504,
  INTERNAL: 500,
  STORE_UNAVAILABLE: 503,
}

t.test('every contract code is in the table with its HTTP status', async (t) => {
  for (const [code, status] of Object.entries(CONTRACT)) {
    t.ok(isErrorCode(code), code)
    if (isErrorCode(code)) t.equal(ERROR_TABLE[code].http, status, code)
  }
  t.equal(ERROR_TABLE.SESSION_PERSISTENCE_DISABLED.rpc, -32003)
  t.equal(ERROR_TABLE.INVALID_REQUEST.rpc, -32602)
  // Order and numbers of every row, appended ones included, are pinned in error-codes.test.ts.
  t.equal(ERROR_TABLE.SESSION_PERSISTENCE_DISABLED.message, "Session persistence is disabled (build without 'session-store').")
  t.equal(ERROR_TABLE.SESSION_COMPACTION_DISABLED.message, "Session compaction is disabled (build without 'session-compaction').")
})

t.test('numbers are never shared between rows', async (t) => {
  const rpc = ERROR_CODES.map((c) => ERROR_TABLE[c].rpc)
  const exit = ERROR_CODES.map((c) => ERROR_TABLE[c].exit)
  t.equal(new Set(rpc).size, rpc.length, 'one JSON-RPC number per row')
  t.equal(new Set(exit).size, exit.length, 'one exit code per row')
  for (const c of ERROR_CODES) {
    const n = ERROR_TABLE[c].rpc
    t.ok(
      (n <= -32001 && n >= -32099) || n === -32602 || n === -32601,
      `${c}: ${n} is in the server range or the matching JSON-RPC reserved code`,
    )
    t.ok(ERROR_TABLE[c].exit > 1 && ERROR_TABLE[c].exit < 126, `${c}: exit code`)
    t.match(c, /^[A-Z][A-Z_]+$/)
  }
})

t.test('docs/api.md documents exactly the table, row by row', async (t) => {
  const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8')
  const section = doc.slice(doc.indexOf('## Error codes'))
  const rows = [...section.matchAll(/^\| `([A-Z_]+)` \| (\d{3}) \| (-\d+) \| (\d+) \|/gm)].map(
    (m) => [m[1]!, Number(m[2]), Number(m[3]), Number(m[4])] as const,
  )
  t.same(
    rows.map((r) => r[0]),
    [...ERROR_CODES],
    'docs/api.md lists exactly the codes of the table, in its order',
  )
  for (const [code, http, rpc, exit] of rows) {
    if (!isErrorCode(code)) continue
    t.equal(http, ERROR_TABLE[code].http, `${code} HTTP in docs/api.md`)
    t.equal(rpc, ERROR_TABLE[code].rpc, `${code} JSON-RPC in docs/api.md`)
    t.equal(exit, ERROR_TABLE[code].exit, `${code} CLI exit code in docs/api.md`)
  }
})

t.test('the OpenAPI document only promises codes of the table', async (t) => {
  const doc = readFileSync(new URL('../../openapi/openapi.json', import.meta.url), 'utf8')
  const named = new Set([...doc.matchAll(/Problem: ([A-Z_, ]+)"/g)].flatMap((m) => m[1]!.split(', ')))
  t.ok(named.size > 5)
  for (const c of named) t.ok(isErrorCode(c), `${c} is a table code`)
})

t.test('BurrowError', async (t) => {
  const e = new BurrowError('SESSION_BUSY')
  t.equal(e.message, ERROR_TABLE.SESSION_BUSY.message)
  t.equal(e.status, 409)
  const wrapped = toBurrowError(new TypeError('boom'))
  t.equal(wrapped.code, 'INTERNAL')
  t.type(wrapped.cause, TypeError)
  t.equal(toBurrowError(e), e)
})
