import { BurrowError, ERROR_TABLE, toBurrowError } from '../../core/errors.js'
import type { Problem } from '../../core/wire.js'
import { invalidField, type ValidationIssue } from '../request-validation.js'

/** `application/problem+json` (RFC 9457) for a BurrowError: status and title come from the one code table. */
export function problemOf(err: BurrowError, requestId: string): Problem {
  const row = ERROR_TABLE[err.code]
  const p: Problem = {
    type: `urn:burrow:problem:${err.code}`,
    title: row.title,
    status: row.http,
    detail: err.code === 'INTERNAL' ? row.message : err.message,
    code: err.code,
    request_id: requestId,
  }
  const field = err.data?.field
  if (typeof field === 'string') p.field = field
  if (err.data && err.code !== 'INTERNAL') {
    const { field: _f, ...rest } = err.data
    if (Object.keys(rest).length > 0) p.data = rest
  }
  return p
}

interface FastifyLikeError {
  code?: string
  statusCode?: number
  message: string
  validation?: ValidationIssue[]
  validationContext?: string
}

// Errors that mean "the body is not JSON at all", as opposed to JSON that fails a check:
// JSON-RPC answers only these with -32700. Ours are tagged here; fastify's own parser (used
// where the REST plugin is not mounted) reports them with these codes.
const syntaxErrors = new WeakSet<BurrowError>()
const FASTIFY_SYNTAX_ERRORS = new Set(['FST_ERR_CTP_INVALID_JSON_BODY', 'FST_ERR_CTP_EMPTY_JSON_BODY'])

/**
 * `INVALID_REQUEST` for a body that is not JSON, from JSON.parse's error. The message gives
 * the position, never a snippet of the body (bodies may hold secrets, and the detail is logged).
 */
export function jsonSyntaxError(err: unknown): BurrowError {
  const at = /position (\d+)/.exec(err instanceof Error ? err.message : '')?.[1]
  const what =
    err instanceof Error && /end of JSON input/.test(err.message)
      ? 'ends early'
      : `is not valid JSON${at === undefined ? '' : ` (at byte ${at})`}`
  const e = new BurrowError('INVALID_REQUEST', `The body ${what}.`, { field: 'body' })
  syntaxErrors.add(e)
  return e
}

/** True for a body that is not JSON (JSON-RPC's -32700), false for every other failure. */
export function isJsonSyntaxError(err: unknown): boolean {
  if (err instanceof BurrowError) return syntaxErrors.has(err)
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && FASTIFY_SYNTAX_ERRORS.has(code)
}

/**
 * Maps what fastify itself throws (validation, body parsing, limits, the router's URL
 * checks) onto the code table. Messages never echo the URL: it may carry `?access_token=`.
 */
export function fromFastifyError(err: unknown): BurrowError {
  if (err instanceof BurrowError) return err
  const e = err as FastifyLikeError
  if (e && Array.isArray(e.validation) && e.validation.length > 0) {
    // fastify says `headers`; the surfaces' own checks name a header `header/<name>`.
    const part = e.validationContext === 'headers' ? 'header' : (e.validationContext ?? 'body')
    return invalidField(part, e.validation[0]!)
  }
  switch (e?.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new BurrowError('PAYLOAD_TOO_LARGE', 'The request body is larger than the server accepts (BURROW_BODY_LIMIT_BYTES).')
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new BurrowError('INVALID_REQUEST', 'The body must be application/json.', { field: 'header/content-type' })
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new BurrowError('INVALID_REQUEST', 'The body is not valid JSON.', { field: 'body' })
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new BurrowError('INVALID_REQUEST', 'The body is not as long as its Content-Length says.', { field: 'header/content-length' })
    case 'FST_ERR_BAD_URL':
      return new BurrowError('INVALID_REQUEST', 'The request path is not valid percent-encoded UTF-8.', { field: 'path' })
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new BurrowError('INVALID_REQUEST', 'A path parameter is longer than any id or key the routes accept.', { field: 'params' })
    default:
      break
  }
  if (err instanceof SyntaxError || (e?.statusCode === 400 && typeof e.message === 'string')) {
    return new BurrowError('INVALID_REQUEST', `The request is malformed: ${e.message}`, { field: 'body' })
  }
  if (e?.statusCode === 413) return new BurrowError('PAYLOAD_TOO_LARGE')
  if (e?.statusCode === 429) return new BurrowError('RATE_LIMITED', e.message)
  return toBurrowError(err)
}
