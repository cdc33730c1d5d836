// Structural checks of error answers against the one code table: a problem document (REST)
// or a JSON-RPC error (/rpc, /mcp). Each returns the list of what is wrong (empty: fine).
import { ERROR_TABLE, isErrorCode } from '../../src/core/errors.js'

/** JSON-RPC's own codes, kept for a payload that is not JSON (-32700) or not a request (-32600). */
export const JSON_RPC_OWN = new Set([-32700, -32600])

const PROBLEM_KEYS = new Set(['type', 'title', 'status', 'detail', 'code', 'request_id', 'field', 'data'])

/** A problem document of the table, answered with its row's status. */
export function problemFaults(status: number, contentType: string | undefined, text: string): string[] {
  const faults: string[] = []
  if (!/^application\/problem\+json\b/.test(contentType ?? '')) faults.push(`content-type ${contentType} is not application/problem+json`)
  let p: any
  try {
    p = JSON.parse(text)
  } catch {
    return [...faults, `body is not JSON: ${text.slice(0, 200)}`]
  }
  if (p === null || typeof p !== 'object' || Array.isArray(p)) return [...faults, 'body is not an object']
  for (const k of Object.keys(p)) if (!PROBLEM_KEYS.has(k)) faults.push(`unexpected key ${k}`)
  for (const k of ['type', 'title', 'detail', 'code', 'request_id']) if (typeof p[k] !== 'string') faults.push(`${k} is not a string`)
  if (p.field !== undefined && typeof p.field !== 'string') faults.push('field is not a string')
  const code: unknown = p.code
  if (!isErrorCode(code)) return [...faults, `code ${String(code)} is not in the table`]
  const row = ERROR_TABLE[code]
  if (p.status !== row.http || status !== row.http) faults.push(`status ${status} / ${p.status} is not ${p.code}'s ${row.http}`)
  if (p.type !== `urn:burrow:problem:${p.code}`) faults.push(`type ${p.type}`)
  if (p.title !== row.title) faults.push(`title ${p.title}`)
  return faults
}

/**
 * A JSON-RPC error on the table: `data.code` a code of the table, `code` its number (or
 * JSON-RPC's own -32700 / -32600 with INVALID_REQUEST). INTERNAL is a fault too: it means a bug.
 */
export function rpcErrorFaults(error: any): string[] {
  if (error === null || typeof error !== 'object') return ['error is not an object']
  const faults: string[] = []
  if (typeof error.message !== 'string') faults.push('error.message is not a string')
  const code: unknown = error.data?.code
  if (!isErrorCode(code))
    return [...faults, `error.data.code ${JSON.stringify(code)} is not in the table (error ${JSON.stringify(error).slice(0, 300)})`]
  if (code === 'INTERNAL') faults.push(`INTERNAL: ${error.message}`)
  const ok = error.code === ERROR_TABLE[code].rpc || (JSON_RPC_OWN.has(error.code) && code === 'INVALID_REQUEST')
  if (!ok) faults.push(`error.code ${error.code} is not ${code}'s ${ERROR_TABLE[code].rpc}`)
  return faults
}

/** A JSON-RPC 2.0 response (or a batch of them), with every error on the table. */
export function rpcResponseFaults(body: unknown): string[] {
  const all = Array.isArray(body) ? body : [body]
  if (Array.isArray(body) && body.length === 0) return ['an empty batch response']
  const faults: string[] = []
  for (const r of all as any[]) {
    if (r === null || typeof r !== 'object' || r.jsonrpc !== '2.0') {
      faults.push(`not a JSON-RPC response: ${JSON.stringify(r).slice(0, 200)}`)
      continue
    }
    if (!('id' in r) || !(r.id === null || typeof r.id === 'string' || typeof r.id === 'number')) faults.push('bad id')
    if ('error' in r === 'result' in r) faults.push('needs exactly one of result and error')
    if ('error' in r) faults.push(...rpcErrorFaults(r.error))
  }
  return faults
}
