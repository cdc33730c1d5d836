/**
 * A value that satisfies a JSON Schema's common keywords, built deterministically: what the
 * offline provider answers when a turn asks for structured output or forces a tool call. Strings
 * carry `text` (the input it echoes), within their length bounds; numbers sit at their minimum or
 * zero; arrays have their minimum length; objects have every listed property. Formats, patterns
 * and the like are not honoured: such a schema's answer fails the service's check, as a real
 * model's wrong answer would.
 */
export function schemaInstance(schema: unknown, text: string, depth = 0): unknown {
  if (typeof schema !== 'object' || schema === null || depth > 32) return null
  const s = schema as Record<string, any>
  if ('const' in s) return s.const
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0]
  if (s.default !== undefined) return s.default
  const options = s.anyOf ?? s.oneOf
  if (Array.isArray(options) && options.length > 0) return schemaInstance(options[0], text, depth + 1)
  if (Array.isArray(s.allOf) && s.allOf.length > 0) return schemaInstance({ ...s.allOf[0], ...s, allOf: undefined }, text, depth + 1)
  const type = Array.isArray(s.type) ? (s.type.find((t: unknown) => t !== 'null') ?? s.type[0]) : s.type
  switch (type ?? (s.properties ? 'object' : undefined)) {
    case 'object': {
      const out: Record<string, unknown> = {}
      for (const [k, p] of Object.entries((s.properties ?? {}) as Record<string, unknown>)) out[k] = schemaInstance(p, text, depth + 1)
      return out
    }
    case 'array':
      return Array.from({ length: Math.min(16, s.minItems ?? 0) }, () => schemaInstance(s.items, text, depth + 1))
    case 'string': {
      const max = typeof s.maxLength === 'number' ? s.maxLength : Infinity
      const min = typeof s.minLength === 'number' ? s.minLength : 0
      return text.slice(0, max).padEnd(Math.min(min, max), '.')
    }
    case 'integer':
    case 'number': {
      const low = typeof s.minimum === 'number' ? s.minimum : typeof s.exclusiveMinimum === 'number' ? s.exclusiveMinimum + 1 : 0
      const high = typeof s.maximum === 'number' ? s.maximum : Infinity
      const v = Math.min(Math.max(0, low), high)
      return type === 'integer' ? Math.ceil(v) : v
    }
    case 'boolean':
      return true
    case 'null':
      return null
    default:
      return text
  }
}
