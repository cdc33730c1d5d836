// The layering of docs/architecture.md, enforced: a rule nobody checks erodes.
import t from 'tap'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative, dirname, resolve } from 'node:path'
import { importCycles, importGraph, importsOf, sourceFiles } from './helpers/import-graph.js'

const root = resolve(import.meta.dirname, '..')
const src = join(root, 'src')

const files = sourceFiles
const imports = (file: string) => importsOf(readFileSync(file, 'utf8'))

/** Top-level layer of a file under `base` (surfaces/rest → surfaces). */
const layerOf = (base: string, file: string) => relative(base, file).split('/')[0]!

const allowed: Record<string, { layers: string[]; packages: RegExp }> = {
  core: { layers: ['core'], packages: /^typebox$/ },
  session: { layers: ['core', 'session'], packages: /^(node:.*|uuid)$/ },
  // The wing only replicas need (leases, the feed between them, remote interrupts): the session core never imports it.
  replicas: { layers: ['core', 'session', 'replicas'], packages: /^node:.*$/ },
  store: { layers: ['core', 'store'], packages: /^(node:.*|lmdb|pg)$/ },
  memory: { layers: ['core', 'memory'], packages: /^(node:.*|lmdb|hnswlib-node|undici)$/ },
  providers: { layers: ['core', 'providers'], packages: /^(node:.*|undici|eventsource-parser)$/ },
  surfaces: {
    layers: ['core', 'surfaces'],
    packages: /^(node:.*|fastify|fastify-plugin|@fastify\/.*|typebox|ajv|ajv-formats|re2-wasm|@modelcontextprotocol\/.*)$/,
  },
  client: { layers: ['core', 'client'], packages: /^(node:.*|undici|eventsource-parser)$/ },
  app: { layers: ['core', 'session', 'replicas', 'store', 'memory', 'providers', 'surfaces', 'client', 'app'], packages: /^(node:.*|.*)$/ },
  bin: { layers: ['app', 'bin'], packages: /^node:.*$/ },
}

/** Imports that break the layering (a layer reaching up or sideways, a package a layer may not use), under `base`. */
function layerViolations(base: string): string[] {
  const out: string[] = []
  for (const file of files(base)) {
    const from = layerOf(base, file)
    const rule = allowed[from]
    const name = relative(base, file)
    if (!rule) {
      out.push(`${name}: unknown layer '${from}'`)
      continue
    }
    for (const spec of imports(file)) {
      if (spec.startsWith('.')) {
        const target = resolve(dirname(file), spec)
        if (!target.startsWith(base + '/')) {
          out.push(`${name} imports outside src: ${spec}`)
          continue
        }
        const to = layerOf(base, target)
        if (!rule.layers.includes(to)) out.push(`${name} (${from}) must not import ${to}: ${spec}`)
      } else if (!rule.packages.test(spec)) {
        out.push(`${name} (${from}) must not import package ${spec}`)
      }
    }
  }
  return out
}

/**
 * Surfaces stay apart: a file of one surface (surfaces/<name>/…) imports its own files, the
 * shared HTTP plumbing (surfaces/http/), the surface-neutral files at surfaces/ top level, and
 * another surface only through its public face (surfaces/<other>/index.ts).
 */
function surfaceViolations(base: string): string[] {
  const surfaces = join(base, 'surfaces')
  const out: string[] = []
  for (const [file, targets] of importGraph(base)) {
    const from = relative(surfaces, file).split('/')
    if (from[0] === '..' || from.length < 2 || from[0] === 'http') continue
    for (const target of targets) {
      const to = relative(surfaces, target).split('/')
      if (to[0] === '..' || to.length < 2 || to[0] === from[0] || to[0] === 'http') continue
      if (to.length === 2 && to[1] === 'index.ts') continue
      out.push(`${relative(base, file)} reaches into surfaces/${to[0]}: ${relative(base, target)}`)
    }
  }
  return out.sort()
}

t.test('every import respects the layering', async (t) => {
  t.ok(files(src).length > 20, 'found the sources')
  t.same(layerViolations(src), [])
})

t.test('no import cycles, type-only imports included', async (t) => {
  t.same(importCycles(importGraph(src), src), [], 'a cycle: move what both sides need into a file of its own')
})

t.test('surfaces reach each other only through surfaces/http/ and their index.ts', async (t) => {
  t.same(surfaceViolations(src), [])
})

t.test('the checkers catch a synthetic violation of each rule', async (t) => {
  const base = mkdtempSync(join(tmpdir(), 'burrow-arch-'))
  t.teardown(() => rmSync(base, { recursive: true, force: true }))
  const put = (file: string, text: string) => {
    mkdirSync(dirname(join(base, file)), { recursive: true })
    writeFileSync(join(base, file), text)
  }
  put('core/a.ts', "import { b } from '../session/b.js'\nexport const a = b\n")
  put('session/b.ts', "import type { C } from './c.js'\nexport const b = 1\nexport type B = C\n")
  put('session/c.ts', "import type { B } from './b.js'\nexport type C = B | number\n")
  put('surfaces/rest/r.ts', 'export const r = 1\n')
  put('surfaces/rest/index.ts', "export { r } from './r.js'\n")
  put('surfaces/rpc/x.ts', "import { r } from '../rest/r.js'\nexport const x = r\n")
  put('surfaces/cli/y.ts', "import { r } from '../rest/index.js'\nimport { h } from '../http/h.js'\nexport const y = r + h\n")
  put('surfaces/http/h.ts', 'export const h = 1\n')
  put('surfaces/fastify-user.ts', "import lmdb from 'lmdb'\nexport default lmdb\n")
  put('replicas/owner.ts', "import { b } from '../session/b.js'\nexport const owner = b\n")
  put('session/d.ts', "import { owner } from '../replicas/owner.js'\nexport const d = owner\n")
  t.same(layerViolations(base), [
    'core/a.ts (core) must not import session: ../session/b.js',
    'session/d.ts (session) must not import replicas: ../replicas/owner.js',
    'surfaces/fastify-user.ts (surfaces) must not import package lmdb',
  ])
  t.same(importCycles(importGraph(base), base), [['session/b.ts', 'session/c.ts']], 'a cycle of type-only imports')
  t.same(surfaceViolations(base), ['surfaces/rpc/x.ts reaches into surfaces/rest: surfaces/rest/r.ts'], 'index.ts and http/ are allowed')
})

t.test('source files stay small', async (t) => {
  const big = files(src)
    .filter((f) => readFileSync(f, 'utf8').split('\n').length > 400)
    .map((f) => relative(root, f))
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
  const bad = files(src)
    .filter((f) => !NUMBER_HOMES.includes(relative(root, f)))
    .flatMap((f) => protocolNumbers(readFileSync(f, 'utf8')).map((n) => `${relative(root, f)}: ${n}`))
  t.same(bad, [], 'import JSON_RPC / EXIT from core/protocol-numbers.ts or a row of core/errors.ts')
  // The checker sees numbers in code, not in prose.
  t.same(protocolNumbers('if (code === -32600) process.exit(78)\nprocess.exitCode = 1'), ['-32600', 'exit(78', 'exitCode = 1'])
  t.same(protocolNumbers("// answered -32700\n/** exits 78 */ const url = 'https://x' // exit(1)"), [])
})
