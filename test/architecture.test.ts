// The layering of docs/architecture.md, enforced: a rule nobody checks erodes.
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

// One schema source (issue 15): requests are checked by one validator, and the protocols' own
// numbers are written only beside the code table.

const ONE_VALIDATOR = 'src/surfaces/request-validation.ts'
const NUMBER_HOMES = ['src/core/errors.ts', 'src/core/protocol-numbers.ts']

/** Code without its comments (roughly: enough to tell a number in code from one in prose). */
const code = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1')

/** JSON-RPC error numbers or process exit codes written out in code. */
function protocolNumbers(text: string): string[] {
  const c = code(text)
  return [...c.matchAll(/-32[0-9]{3}\b/g), ...c.matchAll(/\b(?:exit|exitCode)\s*(?:\(|=)\s*[0-9]+/g)].map((m) => m[0])
}

t.test('only request-validation.ts builds a validator; zod is not used', async (t) => {
  const bad: string[] = []
  for (const file of files(src)) {
    const rel = relative(root, file)
    for (const spec of imports(file)) {
      if ((spec === 'ajv' || spec === 'ajv-formats') && rel !== ONE_VALIDATOR) bad.push(`${rel} imports ${spec}`)
      if (spec === 'zod' || spec.startsWith('zod/')) bad.push(`${rel} imports ${spec}`)
    }
  }
  t.same(bad, [])
})

t.test('JSON-RPC numbers and exit codes are written only beside the code table', async (t) => {
  const bad = files(src).filter((f) => !NUMBER_HOMES.includes(relative(root, f)))
    .flatMap((f) => protocolNumbers(readFileSync(f, 'utf8')).map((n) => `${relative(root, f)}: ${n}`))
  t.same(bad, [], 'import JSON_RPC / EXIT from core/protocol-numbers.ts or a row of core/errors.ts')
  // The checker sees numbers in code, not in prose.
  t.same(protocolNumbers('if (code === -32600) process.exit(78)\nprocess.exitCode = 1'), ['-32600', 'exit(78', 'exitCode = 1'])
  t.same(protocolNumbers('// answered -32700\n/** exits 78 */ const url = \'https://x\' // exit(1)'), [])
})
