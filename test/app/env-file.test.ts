// npm start reads .env from its working directory: .env.example copied as is starts a working
// offline service, a variable in .env is honoured, one set in the environment wins, and a .env
// that cannot be read or would be read only in part refuses start-up (exit 78, one line).
import t, { type Test } from 'tap'
import { copyFile, mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseEnv } from 'node:util'
import { loadEnvFile } from '../../src/app/env-file.js'
import { StartupError } from '../../src/app/startup-error.js'
import { Api } from '../helpers/harness.js'
import { startServer, stopServer } from '../helpers/child-server.js'
import { assertRefused } from '../helpers/startup-faults.js'

const EXAMPLE = fileURLToPath(new URL('../../.env.example', import.meta.url))

/** An empty working directory for the child (removed at teardown). */
async function workDir(t: Test): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-envfile-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

t.test('.env.example copied to .env unchanged starts a working offline service', async (t) => {
  const cwd = await workDir(t)
  await copyFile(EXAMPLE, join(cwd, '.env'))
  // Only PORT comes from the environment (8080 may be taken on a test machine): it also shows the
  // environment winning over .env. Nothing else configures the child.
  const out = await startServer({ PORT: '0' }, { cwd, inherit: false })
  if (out.kind !== 'listening') return t.fail(`did not start (${out.code ?? out.signal}): ${out.stderr}`)
  t.teardown(() => stopServer(out.server))
  const { lines, url } = out.server
  t.same(lines.find((l) => l.env_file)?.env_file, join(cwd, '.env'), 'logs the .env it read')
  const started = lines.find((l) => l.address)
  t.same(started.capabilities, { session_store: true, memory_store: true, session_compaction: true }, "the example's capabilities")
  t.equal(started.default_model, 'offline:echo', 'no provider selected: the offline model')
  t.equal(started.data_dir, './data', "the example's data directory, relative to the working directory")
  t.ok((await stat(join(cwd, 'data', 'lmdb', 'data.mdb'))).isFile(), 'the store is in the working directory')

  const api = new Api(url)
  t.equal((await api.get('/healthz')).status, 200)
  const created = await api.post('/v1/sessions', {})
  t.equal(created.status, 201)
  t.equal(created.body.model, 'offline:echo')
  const turn = await api.turn(created.body.session_id, { input: 'hello' })
  t.equal(turn.status, 200)
  t.equal(turn.body.status, 'completed')
  t.equal(turn.body.output_text, 'echo: hello')
})

t.test('a variable in .env is honoured; the same variable in the environment wins', async (t) => {
  const cwd = await workDir(t)
  await writeFile(
    join(cwd, '.env'),
    [
      '# capabilities off, then compaction turned back on by the environment',
      'BURROW_SESSION_STORE=off',
      'BURROW_MEMORY_STORE=off',
      'BURROW_COMPACTION=off',
      'PORT=8080',
      '',
    ].join('\n'),
  )
  const out = await startServer({ BURROW_COMPACTION: 'on', PORT: '0', HOST: '127.0.0.1' }, { cwd, inherit: false })
  if (out.kind !== 'listening') return t.fail(`did not start (${out.code ?? out.signal}): ${out.stderr}`)
  t.teardown(() => stopServer(out.server))
  const started = out.server.lines.find((l) => l.address)
  t.same(started.capabilities, { session_store: false, memory_store: false, session_compaction: true })
  t.not(new URL(started.address).port, '8080', 'PORT from the environment, not .env')
})

t.test('a .env that cannot be used refuses start-up', async (t) => {
  t.test('a line that is not NAME=value (Node would drop every assignment after it)', async (t) => {
    const cwd = await workDir(t)
    const file = join(cwd, '.env')
    await writeFile(file, 'BURROW_SESSION_STORE=off\nthis line is a typo\nBURROW_MEMORY_STORE=off\nSECRET_TOKEN=hunter2\n')
    const line = await assertRefused(t, await startServer({}, { cwd }), [file, 'line 2'])
    t.notOk(line.includes('hunter2'), 'values are not printed')
  })

  t.test('.env is a directory', async (t) => {
    const cwd = await workDir(t)
    await mkdir(join(cwd, '.env'))
    await assertRefused(t, await startServer({}, { cwd }), [join(cwd, '.env'), 'EISDIR'])
  })
})

// In process, through the real loader: which files are taken in full, which are refused.
t.test('loadEnvFile: what Node reads in full is loaded; what it would read in part is refused', async (t) => {
  const dir = await workDir(t)
  const P = 'BURROW_ENVFILE_TEST_'
  const loaded = (text: string) => {
    const file = join(dir, `case-${Math.random().toString(36).slice(2)}.env`)
    return writeFile(file, text).then(() => file)
  }
  t.teardown(() => {
    for (const k of Object.keys(process.env)) if (k.startsWith(P)) delete process.env[k]
  })

  // Each case names its variables apart (${P}<case>_…): a variable already set wins over a file.
  const good: Record<string, (p: string) => string> = {
    'a multi-line quoted value': (p) => `${p}A="line one\nline two"\n${p}B=2\n`,
    'a multi-line value holding NAME=value lines': (p) => `${p}PEM="-----BEGIN\n${p}NOT_A_VAR=x\n-----END"\n${p}B=2\n`,
    'quotes, export, spaces, CRLF, comments': (p) => `export ${p}A='x y'\r\n# note\r\n${p}B = 1 # c\r\n${p}C=\r\n`,
  }
  for (const [i, [name, make]] of Object.entries(good).entries()) {
    const text = make(`${P}${i}_`)
    const file = await loaded(text)
    t.equal(loadEnvFile(file), file, `${name}: loaded`)
    const expected = parseEnv(text)
    t.ok(Object.keys(expected).length >= 2, `${name}: Node's parser reads it`)
    t.same(
      Object.fromEntries(Object.keys(expected).map((k) => [k, process.env[k]])),
      expected,
      `${name}: every variable, as Node parses it`,
    )
  }

  const bad: Record<string, [(p: string) => string, number]> = {
    'a line that is not an assignment': [(p) => `${p}X=1\nnot an assignment\n${p}Y=2\n`, 2],
    'a byte-order mark (it would become part of the first name)': [(p) => `\ufeff${p}X=1\n${p}Y=2\n`, 1],
    'an indented comment (Node joins it to the next line)': [(p) => `${p}X=1\n  # note\n${p}Y=2\n`, 2],
  }
  for (const [i, [name, [make, line]]] of Object.entries(bad).entries()) {
    const p = `${P}BAD${i}_`
    const file = await loaded(make(p))
    try {
      loadEnvFile(file)
      t.fail(`${name}: loaded`)
    } catch (err) {
      t.type(err, StartupError, name)
      t.ok((err as Error).message.startsWith(`${file} line ${line} `), `${name}: names the file and line ${line}`)
    }
    t.same([process.env[`${p}X`], process.env[`${p}Y`]], [undefined, undefined], `${name}: nothing loaded`)
  }

  t.equal(loadEnvFile(join(dir, 'missing.env')), null, 'no file: nothing to do')
})
