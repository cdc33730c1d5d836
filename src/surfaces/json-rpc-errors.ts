import { ERROR_TABLE, toBurrowError, type ErrorCode } from '../core/errors.js'

/**
 * JSON-RPC 2.0's own error numbers, which are not rows of the code table: a payload that is not
 * JSON, a message that is not a request, and what a peer (the MCP SDK) answers for an error
 * without a code. Each goes out with `data.code` from the table (INVALID_REQUEST, or INTERNAL).
 */
export const PARSE_ERROR = -32700
export const NOT_A_REQUEST = -32600
export const JSONRPC_INTERNAL_ERROR = -32603

/** A JSON-RPC error object on the one code table. */
export interface RpcError { code: number; message: string; data: { code: ErrorCode; [k: string]: unknown } }

/**
 * Anything thrown, as a JSON-RPC error: the table's number in `code` (or `number`, one of
 * JSON-RPC's own above), the string code in `data.code`, the error's detail beside it —
 * except for INTERNAL, whose cause stays in the logs. Shared by the JSON-RPC and MCP surfaces.
 */
export function rpcError(err: unknown, number?: number): RpcError {
  const e = toBurrowError(err)
  const internal = e.code === 'INTERNAL'
  return {
    code: number ?? ERROR_TABLE[e.code].rpc,
    message: internal ? ERROR_TABLE.INTERNAL.message : e.message,
    data: { ...(internal ? {} : e.data), code: e.code },
  }
}
