import { ERROR_TABLE, toBurrowError, type ErrorCode } from '../core/errors.js'

/** A JSON-RPC error object on the one code table. */
export interface RpcError {
  code: number
  message: string
  data: { code: ErrorCode; [k: string]: unknown }
}

/**
 * Anything thrown, as a JSON-RPC error: the table's number in `code` (or `number`, one of
 * JSON-RPC's own: core/protocol-numbers.ts), the string code in `data.code`, the error's detail beside it —
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
