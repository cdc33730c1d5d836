/**
 * How every surface checks a request against its TypeBox schema, and how a failure is
 * reported: one Ajv configuration (REST bodies, JSON-RPC params and MCP tool arguments are
 * JSON and never coerced; query strings, path params and headers are text and may be) and
 * one mapping of a validation error onto `INVALID_REQUEST` with the failing `field`, so the
 * same bad input gets the same code, field and message on every surface — only the root of
 * the field differs (`body/…`, `query/…`, `params/…`, `arguments/…`).
 */
import { Ajv, type ErrorObject } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { TSchema } from 'typebox'
import type { JsonCheck, SchemaCompiler } from '../core/answer-schema.js'
import { BurrowError } from '../core/errors.js'
import { re2RegExp } from './answer-regexp.js'
import { assertJsonDepth } from './json-depth.js'

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv

/**
 * A validator of requests: unknown properties are an error (never stripped), defaults are
 * filled in, the first error is reported. `coerceTypes` only for values that are text on the
 * wire ("5" → 5 in a query string); JSON values are taken as typed.
 */
export function requestAjv(opts: { coerceTypes: boolean }): Ajv {
  return addFormats(new Ajv({ allErrors: false, strict: false, useDefaults: true, removeAdditional: false, coerceTypes: opts.coerceTypes }))
}

/** The parts of an Ajv error the mapping reads (fastify hands them on as `err.validation`). */
export type ValidationIssue = Pick<ErrorObject, 'instancePath' | 'keyword' | 'params' | 'message' | 'propertyName'>

/**
 * `INVALID_REQUEST` for a validation failure of the value at `root`: `field` is the path of
 * the failing value (`body/compaction/recent_turn_budget`), of the missing property for
 * `required`, or of the unknown one for `additionalProperties`. A key that fails `propertyNames`
 * is not echoed (it may be long): the field is its object's.
 */
export function invalidField(root: string, issue: ValidationIssue): BurrowError {
  let field = `${root}${issue.instancePath}`
  let problem = issue.message ?? 'is invalid'
  if (issue.keyword === 'required') {
    field = `${field}/${String(issue.params.missingProperty)}`
    problem = 'is required'
  } else if (issue.keyword === 'additionalProperties') {
    field = `${field}/${String(issue.params.additionalProperty)}`
    problem = 'is not an allowed property'
  } else if (issue.keyword === 'enum' || issue.keyword === 'const') {
    problem = `must be one of ${JSON.stringify(issue.params.allowedValues ?? issue.params.allowedValue)}`
  }
  if (issue.propertyName !== undefined) problem = `has a property name that ${problem}`
  return new BurrowError('INVALID_REQUEST', `${field} ${problem}`, { field })
}

let jsonAjv: Ajv | undefined

/**
 * A compiled check of a JSON value that is a whole request's arguments (JSON-RPC params, MCP
 * tool arguments): its nesting is bounded first (before anything recurses into it), then it
 * is validated — defaults filled in — against `schema`. Throws `INVALID_REQUEST` naming the
 * field under `root`. Shares one Ajv instance, which caches what it compiles.
 */
export function argumentsCheck(schema: TSchema, root: string): (value: unknown) => void {
  const validate = (jsonAjv ??= requestAjv({ coerceTypes: false })).compile(schema)
  return (value) => {
    assertJsonDepth(value, schema as Record<string, unknown>, root)
    if (!validate(value)) throw invalidField(root, validate.errors![0]!)
  }
}

let answerAjv: Ajv | undefined
/** Schemas compiled by `answerAjv`: Ajv keeps every pattern it compiled, so the instance is replaced now and then. */
let answerAjvCompiled = 0
const answerChecks = new Map<string, JsonCheck>()
/** Compiled answer schemas kept (the oldest goes first): sessions reuse theirs turn after turn. */
const ANSWER_CHECKS_KEPT = 256

/**
 * The service's SchemaCompiler (core/answer-schema.ts): a turn's `response_format` schema, compiled
 * once per distinct schema. Its own Ajv instance, so a client's schemas never share a cache
 * with the service's request schemas; defaults are not filled in (an answer is read, not completed).
 */
export const compileAnswerSchema: SchemaCompiler = (schema) => {
  const key = JSON.stringify(schema)
  const known = answerChecks.get(key)
  if (known) return known
  if (!answerAjv || answerAjvCompiled >= ANSWER_CHECKS_KEPT) {
    // Patterns run on RE2 (answer-regexp.ts): a client's regular expression cannot take exponential time.
    answerAjv = addFormats(new Ajv({ allErrors: false, strict: false, validateSchema: true, code: { regExp: re2RegExp } }))
    answerAjvCompiled = 0
  }
  const ajv = answerAjv
  answerAjvCompiled++
  const validate = ajv.compile(schema)
  ajv.removeSchema(schema) // the function is kept here; Ajv's own cache would grow with every distinct schema
  // An async schema validates through a promise: checked as below, every answer would pass (and a failure reject unobserved).
  if ((validate as { $async?: boolean }).$async) throw new Error('$async schemas are not supported')
  const check: JsonCheck = (value) => {
    if (validate(value)) return null
    const e = validate.errors?.[0]
    return e ? `${e.instancePath || '/'} ${e.message ?? 'is invalid'}` : 'is invalid'
  }
  if (answerChecks.size >= ANSWER_CHECKS_KEPT) answerChecks.delete(answerChecks.keys().next().value!)
  answerChecks.set(key, check)
  return check
}
