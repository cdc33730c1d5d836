// The repository carries its own documentation: nothing in it points outside it, every link
// in the README and docs/ resolves inside it, the README stays a front door, and
// docs/configuration.md, .env.example and src/app/config.ts name the same variables with the
// same defaults.
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { parseEnv } from 'node:util'
import { loadConfig } from '../src/app/config.js'

const root = resolve(import.meta.dirname, '..')
const read = (path: string) => readFileSync(join(root, path), 'utf8')

/** Tracked files (git), or, outside a checkout, every file but dependencies, builds and data. */
function repositoryFiles(): string[] {
  try {
    return execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
      .split('\0')
      .filter((f) => f.length > 0 && existsSync(join(root, f)))
  } catch {
    const skip = new Set(['.git', 'node_modules', 'dist', 'data'])
    const walk = (dir: string): string[] =>
      readdirSync(join(root, dir)).flatMap((f) => {
        const p = dir ? `${dir}/${f}` : f
        if (skip.has(f)) return []
        return statSync(join(root, p)).isDirectory() ? walk(p) : [p]
      })
    return walk('')
  }
}

const DOCS = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
]

t.test('nothing in the repository points at documents outside it', async (t) => {
  // Spelled in pieces, so this file does not name what it looks for.
  const outside = [
    ['..', 'shared'].join('/'),
    ['CONTRACT', 'md'].join('.'),
    ['contract', '§'].join(' '),
    ['STYLE', 'md'].join('.'),
    ['STACK-NOTES', 'md'].join('.'),
  ]
  const files = repositoryFiles()
  t.ok(files.length > 100, `read the repository (${files.length} files)`)
  const found: string[] = []
  for (const f of files) {
    const bytes = readFileSync(join(root, f))
    if (bytes.includes(0)) continue // binary
    const text = bytes.toString('utf8')
    for (const needle of outside) {
      if (text.toLowerCase().includes(needle.toLowerCase())) found.push(`${f}: ${needle}`)
    }
  }
  t.same(found, [])
})

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function anchors(markdown: string): Set<string> {
  const out = new Set<string>()
  let fenced = false
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced
    const m = !fenced && /^#{1,6} (.+)$/.exec(line)
    if (m)
      out.add(
        m[1]!
          .trim()
          .toLowerCase()
          .replace(/[^\p{L}\p{N} _-]/gu, '')
          .replace(/ /g, '-'),
      )
  }
  return out
}

t.test('every link in the README and docs/ resolves inside the repository', async (t) => {
  const problems: string[] = []
  let links = 0
  for (const doc of DOCS) {
    const text = read(doc).replace(/^```[\s\S]*?^```$/gm, '')
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!
      if (/^[a-z]+:/i.test(target)) {
        problems.push(`${doc}: links outside the repository: ${target}`)
        continue
      }
      links++
      const [path, anchor] = target.split('#') as [string, string | undefined]
      const file = path === '' ? join(root, doc) : resolve(dirname(join(root, doc)), path)
      if (relative(root, file).startsWith(`..${sep}`) || relative(root, file) === '..') {
        problems.push(`${doc}: ${target} leaves the repository`)
        continue
      }
      if (!existsSync(file)) {
        problems.push(`${doc}: ${target} does not exist`)
        continue
      }
      if (anchor !== undefined && file.endsWith('.md') && !anchors(readFileSync(file, 'utf8')).has(anchor))
        problems.push(`${doc}: ${target} names no heading`)
    }
  }
  t.ok(links > 20, `checked ${links} links`)
  t.same(problems, [])
})

t.test('the README is a front door: at most 10 KB, the two-command quick start, links to every doc', async (t) => {
  const readme = read('README.md')
  t.ok(Buffer.byteLength(readme) <= 10 * 1024, `README.md is ${Buffer.byteLength(readme)} bytes`)
  t.match(readme, /^npm ci && npm start {3}#/m, 'one command installs and starts the service')
  t.match(readme, /^npm ci && npm test {4}#/m, 'one command installs and runs the tests')
  const scripts = JSON.parse(read('package.json')).scripts as Record<string, string>
  t.equal(scripts.start, 'node dist/bin/server.js')
  t.equal(scripts.test, 'tap')
  t.equal(scripts.bench, 'tsx bench/run.ts', 'npm run bench runs the benchmarks')
  for (const doc of DOCS.filter((d) => d !== 'README.md')) t.ok(readme.includes(`](${doc})`), `README links ${doc}`)
})

/** Variables src/app/config.ts reads. */
function configVariables(): Set<string> {
  return new Set([...read('src/app/config.ts').matchAll(/r\.\w+\('([A-Z][A-Z0-9_]+)'/g)].map((m) => m[1]!))
}

/** `| \`NAME\` | default | meaning |` rows of a section of docs/configuration.md. */
function documentedVariables(section: string): Map<string, string> {
  const doc = read('docs/configuration.md')
  const start = doc.indexOf(`\n## ${section}\n`)
  const end = doc.indexOf('\n## ', start + 1)
  const rows = [...doc.slice(start, end < 0 ? undefined : end).matchAll(/^\| `([A-Z][A-Z0-9_]+)` \| ([^|]+) \|/gm)]
  return new Map(rows.map((m) => [m[1]!, m[2]!.trim()]))
}

t.test('docs/configuration.md, .env.example and config.ts name the same variables', async (t) => {
  const inCode = configVariables()
  const inDocs = documentedVariables('Server variables')
  const example = read('.env.example')
  const inExample = new Set([...example.matchAll(/^#?\s*([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1]!))
  t.ok(inCode.size > 30, `config.ts reads ${inCode.size} variables`)
  t.same(
    [...inCode].filter((v) => !inDocs.has(v)),
    [],
    'read by config.ts but not in docs/configuration.md',
  )
  t.same(
    [...inDocs.keys()].filter((v) => !inCode.has(v)),
    [],
    'in docs/configuration.md but never read',
  )
  t.same(
    [...inCode].filter((v) => !inExample.has(v)),
    [],
    'read by config.ts but not in .env.example',
  )
  t.same([...inDocs.keys()], [...new Set(inDocs.keys())], 'one row per variable')
  const cli = documentedVariables('CLI variables')
  t.same([...cli.keys()].sort(), ['BURROW_API_KEY', 'BURROW_URL'])
})

t.test('the defaults agree: docs/configuration.md, .env.example and loadConfig', async (t) => {
  const example = read('.env.example')
  const values = parseEnv(example)
  const documented = documentedVariables('Server variables')
  for (const [name, value] of Object.entries(values)) {
    const cell = documented.get(name)
    if (value === '') t.ok(cell !== undefined, `${name}: documented (empty in .env.example: the default)`)
    else t.ok(cell?.includes(`\`${value}\``), `${name}: docs/configuration.md gives the default ${value} (got: ${cell})`)
  }
  // Commented-out lines show a default that must not be set (setting OPENAI_BASE_URL turns its provider on).
  for (const m of example.matchAll(/^#\s*([A-Z][A-Z0-9_]+)=(.+)$/gm)) {
    t.ok(documented.get(m[1]!)?.includes(`\`${m[2]!.trim()}\``), `${m[1]}: the commented default matches docs/configuration.md`)
  }
  // .env.example promises the defaults: loading it changes nothing.
  t.same(loadConfig(values), loadConfig({}), '.env.example as it is configures exactly the defaults')
})
