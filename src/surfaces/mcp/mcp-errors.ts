/**
 * JSON-RPC errors of the MCP HTTP surface on the one code table: every error carries the
 * table's code in `data.code` and its number in `code` (JSON-RPC's own -32700 and -32600
 * stay, with `data.code` INVALID_REQUEST). The SDK answers some failures itself with bare
 * JSON-RPC codes: they are mapped here on their way out.
 */
import { BurrowError, ERROR_TABLE, ERROR_CODES, isErrorCode, type ErrorCode } from '../../core/errors.js'
import { JSON_RPC } from '../../core/protocol-numbers.js'
import { rpcError, type RpcError } from '../json-rpc-errors.js'
import { invalidField } from '../request-validation.js'

const byNumber = new Map<number, ErrorCode>(ERROR_CODES.map((c) => [ERROR_TABLE[c].rpc, c]))

/**
 * An error the SDK (or a handler) produced, on the table. `onInternal` hears what becomes
 * INTERNAL: clients get no detail of it, the logs do.
 */
export function tableError(err: unknown, onInternal?: (detail: unknown) => void): RpcError {
  const e = (typeof err === 'object' && err !== null ? err : {}) as { code?: unknown; message?: unknown; data?: unknown }
  const code = typeof e.code === 'number' && Number.isSafeInteger(e.code) ? e.code : undefined
  const message = typeof e.message === 'string' ? e.message : ''
  const data = typeof e.data === 'object' && e.data !== null && !Array.isArray(e.data) ? (e.data as Record<string, unknown>) : undefined
  if (code !== undefined && isErrorCode(data?.code) && (code === ERROR_TABLE[data.code].rpc || data.code === 'INVALID_REQUEST')) {
    return { code, message, data: data as RpcError['data'] }
  }
  if (code === JSON_RPC.PARSE_ERROR || code === JSON_RPC.INVALID_REQUEST)
    return { code, message, data: { ...data, code: 'INVALID_REQUEST' } }
  if (code === JSON_RPC.INTERNAL_ERROR) {
    // what the SDK answers for an error without a code: its own checks of params, or a bug
    const invalid = sdkIssues(message)
    if (invalid) return rpcError(invalid)
  }
  const row = code === undefined ? undefined : byNumber.get(code)
  if (row !== undefined && row !== 'INTERNAL') return { code: code!, message, data: { ...data, code: row } }
  onInternal?.(err)
  return rpcError(new BurrowError('INTERNAL'))
}

/**
 * The SDK checks each request's params itself (with zod) and answers a failure as an internal
 * error whose message is the issues as JSON; it is the caller's mistake, so INVALID_REQUEST
 * naming the first issue's field (its path starts at the request: `params/…`), mapped like
 * every other validation failure.
 */
function sdkIssues(message: string): BurrowError | undefined {
  if (!message.startsWith('[')) return undefined
  let issues: unknown
  try {
    issues = JSON.parse(message)
  } catch {
    return undefined
  }
  const first = Array.isArray(issues) ? (issues[0] as { path?: unknown; message?: unknown } | undefined) : undefined
  if (!first || !Array.isArray(first.path) || typeof first.message !== 'string') return undefined
  const [root = 'params', ...rest] = first.path.map(String)
  return invalidField(root, {
    instancePath: rest.map((k) => `/${k}`).join(''),
    keyword: 'sdk',
    params: {},
    message: `is invalid: ${first.message}`,
  })
}
