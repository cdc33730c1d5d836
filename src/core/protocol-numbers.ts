/**
 * Numbers that belong to the protocols Burrow speaks, not to its code table: JSON-RPC 2.0's
 * own error codes and the process exit codes outside the table's rows. Written only here,
 * beside the table (errors.ts), so that a surface never spells one out and the table's
 * numbers can be checked against them (test/core/error-codes.test.ts).
 */

/** JSON-RPC 2.0's reserved error codes (specification §5.1). */
export const JSON_RPC = {
  /** The payload is not JSON. Answered with `data.code` INVALID_REQUEST. */
  PARSE_ERROR: -32700,
  /** The JSON is not a request object. Answered with `data.code` INVALID_REQUEST. */
  INVALID_REQUEST: -32600,
  /** No such method: the table's ROUTE_NOT_FOUND row. */
  METHOD_NOT_FOUND: -32601,
  /** Invalid params: the table's INVALID_REQUEST row. */
  INVALID_PARAMS: -32602,
  /** What a JSON-RPC peer (the MCP SDK) answers for an error without a code; Burrow itself answers INTERNAL's row. */
  INTERNAL_ERROR: -32603,
} as const

/**
 * Process exit codes that are not rows of the table (each row has its own, 2–125):
 * success, a failure that is a bug, a start-up the operator must fix (sysexits.h
 * EX_CONFIG), and a second Ctrl-C that does not wait for the turn to stop (128 + SIGINT).
 */
export const EXIT = {
  OK: 0,
  FAILURE: 1,
  CONFIG: 78,
  INTERRUPTED: 130,
} as const
