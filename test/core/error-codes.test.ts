// The code table is append-only: every code ever shipped is listed here in table order with its
// numbers. Removing, renaming or reordering a row, or changing a number, fails; a row appended
// after the last pinned one passes (then pin it here too). Protocol numbers that are not rows
// (core/protocol-numbers.ts) must never be taken by one.
import t from 'tap'
import { ERROR_CODES, ERROR_TABLE } from '../../src/core/errors.js'
import { EXIT, JSON_RPC } from '../../src/core/protocol-numbers.js'

type Pin = readonly [code: string, http: number, rpc: number, exit: number]

const PINNED: readonly Pin[] = [
  ['SESSION_PERSISTENCE_DISABLED', 501, -32003, 3],
  ['SESSION_COMPACTION_DISABLED', 501, -32004, 4],
  ['MEMORY_STORE_DISABLED', 501, -32005, 5],
  ['INVALID_REQUEST', 400, -32602, 2],
  ['UNAUTHORIZED', 401, -32006, 6],
  ['SESSION_NOT_FOUND', 404, -32007, 7],
  ['SESSION_BUSY', 409, -32008, 8],
  ['SESSION_ARCHIVED', 409, -32009, 9],
  ['IDEMPOTENCY_CONFLICT', 422, -32010, 10],
  ['PAYLOAD_TOO_LARGE', 413, -32011, 11],
  ['RATE_LIMITED', 429, -32012, 12],
  ['BUDGET_EXCEEDED', 429, -32013, 13],
  ['PROVIDER_NOT_CONFIGURED', 503, -32014, 14],
  ['PROVIDER_ERROR', 502, -32015, 15],
  ['PROVIDER_TIMEOUT', 504, -32016, 16],
  ['INTERNAL', 500, -32017, 17],
  ['ROUTE_NOT_FOUND', 404, -32601, 18],
  ['SHUTTING_DOWN', 503, -32019, 19],
  ['INTERRUPTED', 409, -32020, 20],
  ['NOTE_NOT_FOUND', 404, -32021, 21],
  ['STORE_UNAVAILABLE', 503, -32022, 22],
  ['MEMORY_NOT_FOUND', 404, -32023, 23],
  ['FORBIDDEN', 403, -32024, 24],
]

/** What breaks the pin: each pinned row must be at its index with its numbers; rows after the pins are free. */
function pinViolations(rows: readonly Pin[]): string[] {
  const out: string[] = []
  PINNED.forEach((pin, i) => {
    const row = rows[i]
    if (!row) out.push(`${pin[0]} (row ${i}) was removed`)
    else if (row.join() !== pin.join()) out.push(`row ${i} was ${pin.join(' ')}, is ${row.join(' ')}`)
  })
  return out
}

const table: Pin[] = ERROR_CODES.map((c) => [c, ERROR_TABLE[c].http, ERROR_TABLE[c].rpc, ERROR_TABLE[c].exit])

t.test('every pinned code keeps its place and its numbers', async (t) => {
  t.same(pinViolations(table), [])
  t.ok(table.length >= PINNED.length)
})

t.test('the pin allows appending and catches a removal, a rename, a reorder and a renumbering', async (t) => {
  t.same(pinViolations([...PINNED, ['SOMETHING_NEW', 400, -32099, 99]]), [], 'an appended row passes')
  t.not(pinViolations(PINNED.slice(0, -1)).length, 0, 'a removed row fails')
  t.not(pinViolations(PINNED.map((p, i) => (i === 3 ? (['BAD_REQUEST', p[1], p[2], p[3]] as const) : p))).length, 0, 'a renamed row fails')
  t.not(pinViolations([PINNED[1]!, PINNED[0]!, ...PINNED.slice(2)]).length, 0, 'swapped rows fail')
  t.not(pinViolations(PINNED.map((p, i) => (i === 0 ? ([p[0], p[1], -32098, p[3]] as const) : p))).length, 0, 'a new JSON-RPC number fails')
})

t.test("rows keep out of the protocols' own numbers", async (t) => {
  const mapped = new Map<number, string>([
    [JSON_RPC.INVALID_PARAMS, 'INVALID_REQUEST'],
    [JSON_RPC.METHOD_NOT_FOUND, 'ROUTE_NOT_FOUND'],
  ])
  for (const [code, , rpc, exit] of table) {
    const server = rpc <= -32001 && rpc >= -32099
    t.ok(server || mapped.get(rpc) === code, `${code}: ${rpc} is in the server range, or the JSON-RPC code of the same meaning`)
    t.notOk(Object.values(EXIT).includes(exit as never), `${code}: exit ${exit} is not a process exit code of its own`)
  }
  t.equal(ERROR_TABLE.INVALID_REQUEST.rpc, JSON_RPC.INVALID_PARAMS)
  t.equal(ERROR_TABLE.ROUTE_NOT_FOUND.rpc, JSON_RPC.METHOD_NOT_FOUND)
  t.same(
    JSON_RPC,
    { PARSE_ERROR: -32700, INVALID_REQUEST: -32600, METHOD_NOT_FOUND: -32601, INVALID_PARAMS: -32602, INTERNAL_ERROR: -32603 },
    'JSON-RPC 2.0 §5.1',
  )
  t.same(EXIT, { OK: 0, FAILURE: 1, CONFIG: 78, INTERRUPTED: 130 })
})
