/**
 * Checks a JSON value against a JSON Schema a client gave (a turn's `response_format`). The
 * session layer asks; the one validator configuration of the service (surfaces/request-validation.ts)
 * compiles, and the app hands it over.
 */
export type JsonCheck = (value: unknown) => string | null

/** Compiles a schema into a check (null: the value matches; else what is wrong); throws an Error saying why a schema is unusable. */
export type SchemaCompiler = (schema: Record<string, unknown>) => JsonCheck
