import t from 'tap'
import { readFile } from 'node:fs/promises'
import { generateOpenApi } from '../src/app/openapi.js'

t.test('the committed OpenAPI document is generated from the current route schemas', async (t) => {
  const committed = await readFile(new URL('../openapi/openapi.json', import.meta.url), 'utf8')
  const fresh = await generateOpenApi()
  t.ok(fresh === committed, 'openapi/openapi.json is stale: run `npm run openapi` and commit it')
  const doc = JSON.parse(fresh)
  t.equal(doc.openapi, '3.1.0')
  const ops = Object.values(doc.paths as Record<string, Record<string, { operationId?: string }>>).flatMap((p) =>
    Object.values(p).map((o) => o.operationId),
  )
  t.equal(new Set(ops).size, ops.length, 'operation ids are unique')
  t.ok(ops.every(Boolean), 'every operation has an id')
  for (const path of [
    '/v1/sessions',
    '/v1/sessions/{id}/turns',
    '/v1/sessions/{id}/resume',
    '/v1/sessions/{id}',
    '/v1/sessions/{id}/archive',
    '/v1/sessions/{id}/compact',
    '/v1/sessions/{id}/interrupt',
    '/v1/sessions/{id}/events',
    '/v1/events',
    '/v1/memory/search',
    '/v1/memory',
    '/v1/capabilities',
    '/healthz',
    '/readyz',
    '/metrics',
    '/openapi.json',
  ]) {
    t.ok(doc.paths[path], `documents ${path}`)
  }
})
