// The layering of STYLE.md, enforced: a rule nobody checks erodes.
import t from 'tap'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative, dirname, resolve } from 'node:path'

const root = resolve(import.meta.dirname, '..')
const src = join(root, 'src')

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f)
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : []
  })
}

function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  const out: string[] = []
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]/g)) out.push(m[1]!)
  for (const m of text.matchAll(/(?:^|\n)\s*import\s+['"]([^'"]+)['"]/g)) out.push(m[1]!)
  for (const m of text.matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g)) out.push(m[1]!)
  return out
}

/** Top-level layer of a file under src/ (surfaces/rest → surfaces). */
const layer = (file: string) => relative(src, file).split('/')[0]!

const allowed: Record<string, { layers: string[]; packages: RegExp }> = {
  core: { layers: ['core'], packages: /^typebox$/ },
  session: { layers: ['core', 'session'], packages: /^(node:.*|uuid)$/ },
  store: { layers: ['core', 'store'], packages: /^(node:.*|lmdb|pg)$/ },
  memory: { layers: ['core', 'memory'], packages: /^(node:.*|lmdb|hnswlib-node|undici)$/ },
  providers: { layers: ['core', 'providers'], packages: /^(node:.*|undici|eventsource-parser)$/ },
  surfaces: { layers: ['core', 'surfaces'], packages: /^(node:.*|fastify|fastify-plugin|@fastify\/.*|typebox|ajv|ajv-formats|@modelcontextprotocol\/.*)$/ },
  client: { layers: ['core', 'client'], packages: /^(node:.*|undici|eventsource-parser)$/ },
  app: { layers: ['core', 'session', 'store', 'memory', 'providers', 'surfaces', 'client', 'app'], packages: /^(node:.*|.*)$/ },
  bin: { layers: ['app', 'bin'], packages: /^node:.*$/ },
}

t.test('every import respects the layering', async (t) => {
  const all = files(src)
  t.ok(all.length > 20, 'found the sources')
  const violations: string[] = []
  for (const file of all) {
    const from = layer(file)
    const rule = allowed[from]
    if (!rule) { violations.push(`${relative(root, file)}: unknown layer '${from}'`); continue }
    for (const spec of imports(file)) {
      if (spec.startsWith('.')) {
        const target = resolve(dirname(file), spec)
        if (!target.startsWith(src)) { violations.push(`${relative(root, file)} imports outside src: ${spec}`); continue }
        const to = layer(target)
        if (!rule.layers.includes(to)) violations.push(`${relative(root, file)} (${from}) must not import ${to}: ${spec}`)
      } else if (!rule.packages.test(spec)) {
        violations.push(`${relative(root, file)} (${from}) must not import package ${spec}`)
      }
    }
  }
  t.same(violations, [])
})

t.test('the checker catches a violation', async (t) => {
  // Guard against a checker that silently passes everything: a surface importing the session layer.
  const rule = allowed.surfaces!
  t.notOk(rule.layers.includes('session'))
  t.notOk(allowed.core!.packages.test('fastify'))
  t.same(imports(join(src, 'app', 'burrow.ts')).filter((s) => s.startsWith('.')).length > 0, true)
})

t.test('source files stay small', async (t) => {
  const big = files(src).filter((f) => readFileSync(f, 'utf8').split('\n').length > 400).map((f) => relative(root, f))
  t.same(big, [], 'split files past 400 lines by responsibility')
})
