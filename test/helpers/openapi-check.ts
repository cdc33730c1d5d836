// Validates every HTTP response a test receives against the committed OpenAPI document,
// so the document and the server cannot drift apart unnoticed.
import { readFileSync } from 'node:fs'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormatsModule from 'ajv-formats'
import type { ValidateFunction } from 'ajv'

const addFormats = addFormatsModule as unknown as (a: Ajv2020) => Ajv2020
const doc = JSON.parse(readFileSync(new URL('../../openapi/openapi.json', import.meta.url), 'utf8')) as {
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: unknown }> }> }>>
}
const ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }))
ajv.addSchema(doc, 'openapi.json')
const compiled = new Map<string, ValidateFunction>()
const templates = Object.keys(doc.paths).map((p) => ({ path: p, re: new RegExp(`^${p.replace(/\{[^}]+\}/g, '[^/]+')}$`) }))

const pointer = (parts: string[]) => parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')

/** Returns null when `body` is what the document promises for this route and status, else the problem. */
export function checkResponse(method: string, url: string, status: number, contentType: string | undefined, body: unknown): string | null {
  const path = url.split('?')[0]!
  const tpl = templates.find((t) => t.re.test(path))
  if (!tpl) return status === 404 ? checkProblem(body) : `undocumented path ${path}`
  const op = doc.paths[tpl.path]![method.toLowerCase()]
  if (!op) return status === 404 ? checkProblem(body) : `undocumented method ${method} ${tpl.path}`
  const res = op.responses[String(status)]
  if (!res) return `${method} ${tpl.path}: status ${status} is not documented`
  if (!res.content) return body === undefined || body === '' ? null : `${method} ${tpl.path} ${status}: documented without a body`
  const type = (contentType ?? '').split(';')[0]!.trim()
  if (!res.content[type])
    return `${method} ${tpl.path} ${status}: content-type ${type} not documented (${Object.keys(res.content).join(', ')})`
  const ref = `openapi.json#/${pointer(['paths', tpl.path, method.toLowerCase(), 'responses', String(status), 'content', type, 'schema'])}`
  let v = compiled.get(ref)
  if (!v) {
    v = ajv.compile({ $ref: ref })
    compiled.set(ref, v)
  }
  if (type === 'text/event-stream' || type === 'text/plain') return null // frames are checked one by one (checkFrame)
  return v(body) ? null : `${method} ${tpl.path} ${status}: ${ajv.errorsText(v.errors)}`
}

/** Checks one SSE frame's data against the document's event-stream schema for the route. */
export function checkFrame(method: string, url: string, data: unknown): string | null {
  const path = url.split('?')[0]!
  const tpl = templates.find((t) => t.re.test(path))
  if (!tpl) return `undocumented path ${path}`
  const ref = `openapi.json#/${pointer(['paths', tpl.path, method.toLowerCase(), 'responses', '200', 'content', 'text/event-stream', 'schema'])}`
  let v = compiled.get(ref)
  if (!v) {
    v = ajv.compile({ $ref: ref })
    compiled.set(ref, v)
  }
  return v(data) ? null : `SSE frame on ${tpl.path}: ${ajv.errorsText(v.errors)}`
}

function checkProblem(body: unknown): string | null {
  const v = ajv.getSchema('openapi.json#/components/schemas/Problem')!
  return v(body) ? null : `404 body is not a problem: ${ajv.errorsText(v.errors)}`
}
