/**
 * A bound on how deep the free-form JSON of a request may nest, checked before anything
 * reads it. JSON.parse copes with any depth, but much of what follows recurses (hashing an
 * idempotent request, structuredClone, the store's encoder, JSON.stringify): a body nested
 * a hundred thousand levels deep would overflow the stack there and answer 500.
 *
 * The schema of the request is walked alongside the value, so the field named is the one
 * that is free-form (`body/tools/0/input_schema`), not the path to the deepest leaf. Where
 * the schema fixes the structure, the value may be as deep as the schema (and anything else
 * fails validation next); where it is free-form — an open object, `{}`, a key the schema does
 * not know, a value of the wrong type — the value may nest at most {@link MAX_FREE_JSON_DEPTH}
 * levels. Both walks are iterative: no input can overflow the stack here.
 */
import { BurrowError } from '../core/errors.js'

/** Levels a free-form JSON value in a request may nest (an object or array is one level). */
export const MAX_FREE_JSON_DEPTH = 128

type Schema = Record<string, unknown>

/** Undefined: free-form from here on. */
type Node = { value: unknown; schema: Schema | undefined; path: string }

const isContainer = (v: unknown): v is object => typeof v === 'object' && v !== null

/**
 * Throws `INVALID_REQUEST` naming the free-form field of `value` (rooted at `root`, e.g.
 * `body` or `params`) that nests deeper than `max` levels. `schema` is the JSON Schema the
 * value will be validated against (a TypeBox schema is one).
 */
export function assertJsonDepth(value: unknown, schema: Schema | undefined, root: string, max = MAX_FREE_JSON_DEPTH): void {
  const stack: Node[] = [{ value, schema, path: root }]
  for (let n = stack.pop(); n !== undefined; n = stack.pop()) {
    if (!isContainer(n.value)) continue
    const s = n.schema === undefined ? undefined : structural(n.schema, n.value)
    if (s === undefined) {
      if (depthExceeds(n.value, max))
        throw new BurrowError('INVALID_REQUEST', `${n.path} nests deeper than ${max} levels.`, { field: n.path })
      continue
    }
    if (Array.isArray(n.value)) {
      const items = isSchema(s.items) ? s.items : undefined
      n.value.forEach((v, i) => {
        stack.push({ value: v, schema: items, path: `${n.path}/${i}` })
      })
    } else {
      for (const [k, v] of Object.entries(n.value)) stack.push({ value: v, schema: propertySchema(s, k), path: `${n.path}/${k}` })
    }
  }
}

/**
 * The branch of `schema` that fixes the structure of `value`, or undefined when the schema
 * leaves it free-form there: no schema, `{}`, an object open to any property, a type that
 * does not match (validation refuses it next), a `$ref` (not followed).
 */
function structural(schema: Schema, value: object): Schema | undefined {
  for (const key of ['anyOf', 'oneOf'] as const) {
    const branches = schema[key]
    if (Array.isArray(branches)) {
      for (const b of branches) {
        const fixed = isSchema(b) ? structural(b, value) : undefined
        if (fixed !== undefined) return fixed
      }
      return undefined
    }
  }
  if (Array.isArray(value)) return schema.type === 'array' && isSchema(schema.items) ? schema : undefined
  if (schema.type !== 'object') return undefined
  const closed =
    schema.additionalProperties === false ||
    (isSchema(schema.additionalProperties) && Object.keys(schema.additionalProperties).length > 0) ||
    isSchema(schema.patternProperties)
  return closed ? schema : undefined
}

function propertySchema(s: Schema, key: string): Schema | undefined {
  const props = isSchema(s.properties) ? s.properties : undefined
  if (props && Object.hasOwn(props, key) && isSchema(props[key])) return props[key]
  if (isSchema(s.patternProperties)) {
    for (const [pattern, sub] of Object.entries(s.patternProperties)) {
      if (isSchema(sub) && safeTest(pattern, key)) return sub
    }
  }
  return isSchema(s.additionalProperties) ? s.additionalProperties : undefined
}

function safeTest(pattern: string, key: string): boolean {
  try {
    return new RegExp(pattern, 'u').test(key)
  } catch {
    return false
  }
}

const isSchema = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v)

/** Whether `value` nests more than `max` levels (iterative: any depth is safe to measure). */
export function depthExceeds(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]]
  for (let e = stack.pop(); e !== undefined; e = stack.pop()) {
    const [v, d] = e
    if (!isContainer(v)) continue
    if (d > max) return true
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (isContainer(child)) stack.push([child, d + 1])
  }
  return false
}
