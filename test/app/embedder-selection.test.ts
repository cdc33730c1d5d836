// BURROW_EMBEDDER through the real server start: which embedder memory runs (named in the
// start-up line), and the start-ups it refuses — an unknown value, and use-lite without its optional packages (a copy of the sources whose
// node_modules lacks them) — each with exit 78 and one line, no stack.
import t, { type Test } from 'tap'
import { cp, mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { DEFAULT_EMBEDDER } from '../../src/app/config.js'
import { startServer, stopServer } from '../helpers/child-server.js'
import { assertRefused } from '../helpers/startup-faults.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

async function dataDir(t: Test): Promise<Record<string, string>> {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-embedder-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return { BURROW_MEMORY_STORE: 'hnsw', BURROW_DATA_DIR: dir, BURROW_DURABILITY: 'relaxed' }
}

t.test('BURROW_EMBEDDER picks the embedder; the start-up line names it', async (t) => {
  for (const [value, id] of [
    [undefined, DEFAULT_EMBEDDER === 'hashed' ? /^hashed-/ : /universal-sentence-encoder-lite/],
    ['hashed', /^hashed-/],
    ['use-lite', /universal-sentence-encoder-lite.*\/512$/],
  ] as const) {
    const out = await startServer({ ...(await dataDir(t)), ...(value ? { BURROW_EMBEDDER: value } : {}) })
    if (out.kind !== 'listening') {
      t.fail(`${value ?? 'default'}: did not start: ${out.stderr}`)
      continue
    }
    try {
      const started = out.server.lines.find((l) => l.address)
      t.match(started.embedder, id, `${value ?? 'unset'}: ${started.embedder}`)
      const added = await fetch(`${out.server.url}/v1/memory`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify([
          { content: 'Maria: we finally brought home a beagle puppy from the shelter' },
          { content: 'Tom: the budget review moved to Monday' },
        ]),
      })
      t.equal(added.status, 201)
      const found = (await (await fetch(`${out.server.url}/v1/memory/search?q=${encodeURIComponent('beagle puppy')}&limit=1`)).json()) as {
        results: Array<{ content: string }>
      }
      t.match(found.results[0]?.content, /beagle/, 'memory search works with it')
    } finally {
      await stopServer(out.server)
    }
  }
})

t.test('configuration errors: exit 78, the bad variables named, no stack', async (t) => {
  const cases: Array<[Record<string, string>, string]> = [
    [{ BURROW_EMBEDDER: 'word2vec' }, "BURROW_EMBEDDER must be one of hashed, use-lite (got 'word2vec')"],
  ]
  for (const [env, problem] of cases) {
    const out = await startServer({ ...(await dataDir(t)), ...env })
    if (out.kind === 'listening') {
      await stopServer(out.server)
      t.fail('started')
      continue
    }
    t.equal(out.code, 78, 'exit code 78')
    t.ok(out.stderr.includes(problem), problem)
    t.notOk(/^\s+at /m.test(out.stderr), 'no stack trace')
  }
})

t.test('use-lite without its optional packages: a clear start-up error', async (t) => {
  // The same sources, with a node_modules that has everything but @energetic-ai.
  const root = await mkdtemp(join(tmpdir(), 'burrow-no-use-lite-'))
  t.teardown(() => rm(root, { recursive: true, force: true }))
  await cp(join(ROOT, 'src'), join(root, 'src'), { recursive: true })
  await writeFile(join(root, 'package.json'), JSON.stringify({ name: 'burrow', type: 'module', version: '0.0.0' }))
  await mkdir(join(root, 'node_modules'))
  for (const name of await readdir(join(ROOT, 'node_modules'))) {
    if (name !== '@energetic-ai') await symlink(join(ROOT, 'node_modules', name), join(root, 'node_modules', name))
  }
  const out = await startServer({ ...(await dataDir(t)), BURROW_EMBEDDER: 'use-lite' }, { entry: join(root, 'src', 'bin', 'server.ts') })
  const line = await assertRefused(t, out, ['BURROW_EMBEDDER=use-lite', '@energetic-ai/core', 'BURROW_EMBEDDER=hashed'])
  t.match(line, /npm install/)
  // And the same copy starts with the default embedder: only use-lite needs the packages.
  const ok = await startServer({ ...(await dataDir(t)), BURROW_EMBEDDER: 'hashed' }, { entry: join(root, 'src', 'bin', 'server.ts') })
  t.equal(ok.kind, 'listening', ok.kind === 'exited' ? ok.stderr : 'listening')
  if (ok.kind === 'listening') {
    // The copy has no console/: the API is served all the same, and the console says what is missing (a code of the table).
    const res = await fetch(`${ok.server.url}/console`)
    t.equal(res.status, 404)
    t.match(await res.json(), { code: 'ROUTE_NOT_FOUND', detail: /console's files are missing/ })
    await stopServer(ok.server)
  }
})
