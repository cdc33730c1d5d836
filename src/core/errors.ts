/**
 * The one error-code table (docs/api.md, Error codes). This is the only place an HTTP status,
 * a JSON-RPC number or a CLI exit code is written; every surface derives from it.
 *
 * Codes are append-only: a retired code is never reused, and a JSON-RPC number
 * belongs to one row forever (test/core/error-codes.test.ts pins the order). Clients
 * switch on `code`, never on message text. The protocols' own numbers that are not rows
 * (JSON-RPC's -32700 and -32600, exit 78, …) live beside the table, in protocol-numbers.ts.
 */
import { JSON_RPC } from './protocol-numbers.js'

export const ERROR_TABLE = {
  SESSION_PERSISTENCE_DISABLED: {
    http: 501,
    rpc: -32003,
    exit: 3,
    title: 'Session persistence disabled',
    message: "Session persistence is disabled (build without 'session-store').",
  },
  SESSION_COMPACTION_DISABLED: {
    http: 501,
    rpc: -32004,
    exit: 4,
    title: 'Session compaction disabled',
    message: "Session compaction is disabled (build without 'session-compaction').",
  },
  MEMORY_STORE_DISABLED: {
    http: 501,
    rpc: -32005,
    exit: 5,
    title: 'Memory store disabled',
    message: "Memory store is disabled (build without 'memory-store').",
  },
  INVALID_REQUEST: { http: 400, rpc: JSON_RPC.INVALID_PARAMS, exit: 2, title: 'Invalid request', message: 'The request is invalid.' },
  UNAUTHORIZED: { http: 401, rpc: -32006, exit: 6, title: 'Unauthorized', message: 'Missing or invalid API key.' },
  SESSION_NOT_FOUND: { http: 404, rpc: -32007, exit: 7, title: 'Session not found', message: 'Session not found.' },
  SESSION_BUSY: { http: 409, rpc: -32008, exit: 8, title: 'Session busy', message: 'A turn is already running on this session.' },
  SESSION_ARCHIVED: { http: 409, rpc: -32009, exit: 9, title: 'Session archived', message: 'The session is archived and read-only.' },
  IDEMPOTENCY_CONFLICT: {
    http: 422,
    rpc: -32010,
    exit: 10,
    title: 'Idempotency conflict',
    message: 'This Idempotency-Key was already used with a different request.',
  },
  PAYLOAD_TOO_LARGE: { http: 413, rpc: -32011, exit: 11, title: 'Payload too large', message: 'The request body is too large.' },
  RATE_LIMITED: { http: 429, rpc: -32012, exit: 12, title: 'Rate limited', message: 'Too many requests.' },
  BUDGET_EXCEEDED: {
    http: 429,
    rpc: -32013,
    exit: 13,
    title: 'Budget exceeded',
    message: "The session's max_total_tokens budget is spent.",
  },
  PROVIDER_NOT_CONFIGURED: {
    http: 503,
    rpc: -32014,
    exit: 14,
    title: 'Provider not configured',
    message: "The model's provider has no credentials or endpoint configured.",
  },
  PROVIDER_ERROR: { http: 502, rpc: -32015, exit: 15, title: 'Provider error', message: 'The LLM provider failed.' },
  PROVIDER_TIMEOUT: { http: 504, rpc: -32016, exit: 16, title: 'Provider timeout', message: 'The LLM provider did not answer in time.' },
  INTERNAL: { http: 500, rpc: -32017, exit: 17, title: 'Internal error', message: 'Internal error.' },
  // Appended later, in the order they were added (codes are append-only).
  ROUTE_NOT_FOUND: { http: 404, rpc: JSON_RPC.METHOD_NOT_FOUND, exit: 18, title: 'Not found', message: 'No such route or method.' },
  SHUTTING_DOWN: {
    http: 503,
    rpc: -32019,
    exit: 19,
    title: 'Shutting down',
    message: 'The service is shutting down; retry on another instance.',
  },
  INTERRUPTED: { http: 409, rpc: -32020, exit: 20, title: 'Turn interrupted', message: 'The turn was interrupted.' },
  NOTE_NOT_FOUND: { http: 404, rpc: -32021, exit: 21, title: 'Note not found', message: 'The session has no note with this key.' },
  STORE_UNAVAILABLE: {
    http: 503,
    rpc: -32022,
    exit: 22,
    title: 'Store unavailable',
    message: 'The store cannot make writes durable right now (disk full, I/O error or database down); reads still work. Retry later.',
  },
  MEMORY_NOT_FOUND: { http: 404, rpc: -32023, exit: 23, title: 'Memory entry not found', message: 'Memory entry not found.' },
  FORBIDDEN: {
    http: 403,
    rpc: -32024,
    exit: 24,
    title: 'Forbidden',
    message: 'The credential is valid but its scope does not allow this operation (e.g. a read-only token).',
  },
} as const satisfies Record<string, ErrorRow>

export interface ErrorRow {
  /** HTTP status on the REST surface. */
  readonly http: number
  /** JSON-RPC `error.code`, unique per row, in -32001…-32099 (or a JSON-RPC reserved code with the same meaning). */
  readonly rpc: number
  /** CLI exit code, unique per row, never 0 or 1. */
  readonly exit: number
  readonly title: string
  /** Default message when the thrower gives none. */
  readonly message: string
}

export type ErrorCode = keyof typeof ERROR_TABLE

export const ERROR_CODES = Object.keys(ERROR_TABLE) as ErrorCode[]

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(ERROR_TABLE, value)
}

/**
 * The one error type of the service. Surfaces map it through {@link ERROR_TABLE}
 * only; `data` carries structured detail safe to show a client (e.g. the field).
 */
export class BurrowError extends Error {
  readonly code: ErrorCode
  readonly data: Record<string, unknown> | undefined

  constructor(code: ErrorCode, message?: string, data?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(message ?? ERROR_TABLE[code].message, options)
    this.name = 'BurrowError'
    this.code = code
    this.data = data
  }

  get status(): number {
    return ERROR_TABLE[this.code].http
  }
}

/** `INVALID_REQUEST` naming the offending field (a JSON-pointer-like path such as `body/model`). */
export function invalidRequest(field: string, problem: string): BurrowError {
  return new BurrowError('INVALID_REQUEST', `${field} ${problem}`, { field })
}

/** Wraps anything thrown into a BurrowError; unknown errors become `INTERNAL` (the cause is kept for logs). */
export function toBurrowError(err: unknown): BurrowError {
  if (err instanceof BurrowError) return err
  return new BurrowError('INTERNAL', undefined, undefined, { cause: err })
}

/**
 * `STORE_UNAVAILABLE` for a write the store could not make durable (disk full, I/O error,
 * database gone), keeping the cause for the logs. Storage libraries may hang a second,
 * detailed rejection on their error (lmdb-js: `commitError`, rejected with the errno error);
 * it is observed here, so reporting a failed write never leaves a rejection unhandled.
 */
export function storeUnavailable(err: unknown, what: string): BurrowError {
  if (err instanceof BurrowError && err.code === 'STORE_UNAVAILABLE') return err
  const detail = (err as { commitError?: unknown } | null)?.commitError
  // lmdb-js's own message only points at that promise: say what it means instead.
  const why = detail instanceof Promise ? 'the write failed (disk full or I/O error)' : describeStoreError(err)
  if (detail instanceof Promise) detail.catch(() => undefined)
  return new BurrowError(
    'STORE_UNAVAILABLE',
    `${what} could not be stored: ${why}. Reads still work; retry once the store is writable again.`,
    undefined,
    { cause: err },
  )
}

/**
 * `STORE_UNAVAILABLE` for work cut off because this process lost the session's lease: another
 * replica took the session over, and the fencing token of this process's writes is no longer the
 * newest, so none of them can be stored. The same answer whether the store refused a commit or a
 * lease renewal found the lease gone first (`data.reason` = `lease_lost`, for clients that want to
 * tell it from an outage). Not SESSION_BUSY: the work had started, and nothing says a turn is
 * running now; a 503 says what is true — this replica could not make the work durable — and asks
 * for the retry that works on any replica.
 */
export function leaseLost(sessionId: string): BurrowError {
  return new BurrowError(
    'STORE_UNAVAILABLE',
    `Session ${sessionId} was taken over by another replica: this replica lost its lease (it could not renew it in time), so what the work did after that was not stored. The replica holding the session now records the cut-off turn as failed; retry the request.`,
    { reason: 'lease_lost' },
  )
}

/** `STORE_UNAVAILABLE` for work whose Idempotency-Key claim another replica took over (it stalled past the claim): nothing of it was stored. */
export function claimLost(): BurrowError {
  return new BurrowError(
    'STORE_UNAVAILABLE',
    'Another replica took this request over (this one could not renew its claim of the Idempotency-Key in time), so nothing of it was stored here; retry the request with its key for its outcome.',
    { reason: 'idempotency_claim_lost' },
  )
}

/** `STORE_UNAVAILABLE` for a read the store could not answer (a database that cannot be reached), keeping the cause for the logs. */
export function storeUnreachable(err: unknown, what: string): BurrowError {
  if (err instanceof BurrowError && err.code === 'STORE_UNAVAILABLE') return err
  return new BurrowError(
    'STORE_UNAVAILABLE',
    `${what} could not be read: ${describeStoreError(err)}. Retry once the store can be reached again.`,
    undefined,
    { cause: err },
  )
}

function describeStoreError(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown } | null
  const msg = typeof e?.message === 'string' ? e.message : String(err)
  return typeof e?.code === 'string' ? `${e.code} (${msg})` : msg
}
