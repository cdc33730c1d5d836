// The `burrow` CLI with its real host: in-process on a temp data dir, and against a running
// server with --url. Exit codes and messages come from the one error table.
import t from 'tap'
import { ERROR_TABLE } from '../../../src/core/errors.js'
import { startBurrow } from '../../helpers/harness.js'
import { startFakeLlm } from '../../helpers/fake-llm-server.js'
import { cli, json, spawnCli } from './cli-run.js'
import { tempDir } from '../../helpers/temp-dir.js'

const PERSISTENCE_OFF = "Session persistence is disabled (build without 'session-store').\n"
const COMPACT = JSON.stringify({ compaction: { auto_compact_threshold: 200, recent_turn_budget: 1 } })
const exit = (code: keyof typeof ERROR_TABLE) => ERROR_TABLE[code].exit

t.test('help, version and command-line errors', async (t) => {
  const env = { BURROW_DATA_DIR: await tempDir(t, 'cli') }
  const help = await cli(['--help'], env)
  t.equal(help.code, 0)
  t.match(help.out, /^Usage: burrow <command>/)
  t.match(help.out, /burrow sessions list/)
  t.equal((await cli([], env)).code, 0, 'no command prints the usage')
  t.match((await cli(['--version'], env)).out, /^\d+\.\d+\.\d+\n$/)

  for (const argv of [
    ['bogus'],
    ['sessions'],
    ['sessions', 'lst'],
    ['resume', 'only-one-arg'],
    ['run'],
    ['run', 'a', 'b'],
    ['run', '--port', '1', 'hi'],
    ['sessions', 'list', '--limit', 'ten'],
    ['run', '--unknown', 'hi'],
    ['run', '--session-config', '{bad', 'hi'],
    ['run', '--session-config', '[1]', 'hi'],
  ]) {
    const r = await cli(argv, env)
    t.equal(r.code, exit('INVALID_REQUEST'), `${argv.join(' ')}: exit ${exit('INVALID_REQUEST')}`)
    t.match(r.err, /^error\[INVALID_REQUEST\]: \S/, `${argv.join(' ')}: ${r.err.split('\n')[0]}`)
    t.equal(r.out, '')
  }
  const limit = await cli(['sessions', 'list', '--limit', '1000'], env)
  t.equal(limit.code, exit('INVALID_REQUEST'), 'values are checked by the method table')
  t.match(limit.err, /error\[INVALID_REQUEST\]: params\/limit/)
})

t.test('in-process on the data dir: run, resume with compaction, sessions, memory', async (t) => {
  const env = { BURROW_DATA_DIR: await tempDir(t, 'cli') }
  const first = await cli(['run', '--memory', '--session-config', COMPACT, 'The launch code is PELICAN-42.'], env)
  t.equal(first.code, 0, first.err)
  t.equal(first.out, 'echo: The launch code is PELICAN-42.\n', 'the answer alone on stdout')
  const id = /session ([0-9a-f-]{36}) · turn 1 · \d+ in, \d+ out/.exec(first.err)?.[1]
  t.ok(id, 'stderr names the session and the turn')
  t.ok(first.writes.filter(([s]) => s === 'out').length > 3, 'the text is written as it streams, in pieces')

  // Each command is a new process-like run on the same data dir: the history persists.
  const compactions: string[] = []
  for (let i = 1; i <= 4; i++) {
    const r = await cli(['resume', id!, `Tell me about gardens and rivers, topic ${i}, at some length please`], env)
    t.equal(r.code, 0, r.err)
    t.equal(r.out, `echo: Tell me about gardens and rivers, topic ${i}, at some length please\n`)
    t.match(r.err, new RegExp(`turn ${i + 1} · `))
    compactions.push(...r.err.split('\n').filter((l) => l.startsWith('[compaction')))
    if (r.err.includes('[compaction completed')) {
      const order = r.writes.map(([s, w]) => (s === 'err' && w.startsWith('[compaction') ? 'compaction' : s === 'out' ? 'text' : 'other'))
      t.ok(order.indexOf('compaction') < order.indexOf('text'), 'compaction is shown before the text of its turn')
      t.match(r.err, /, \d+ compaction\n$/, 'the footer counts compaction tokens')
    }
  }
  t.ok(
    compactions.some((l) => /^\[compaction started: \d+ messages, about \d+ tokens of history\]$/.test(l)),
    'compaction_started shown',
  )
  t.ok(
    compactions.some((l) => /^\[compaction completed: \d+ messages → \d+, summary of \d+ tokens\]$/.test(l)),
    'compaction_completed shown',
  )

  const list = await cli(['sessions', 'list'], env)
  t.equal(list.code, 0)
  t.match(list.out, /^SESSION\s+STATUS\s+TURNS\s+UPDATED\s+MODEL\n/)
  t.match(list.out, new RegExp(`${id}  active  5 `))
  const page = json(await cli(['--json', 'sessions', 'list', '--limit', '1'], env))
  t.same(
    page.items.map((s: any) => s.session_id),
    [id],
  )

  const show = await cli(['sessions', 'show', id!], env)
  t.match(show.out, new RegExp(`^Session ${id} \\(active\\)`))
  t.match(show.out, /compaction 1 so far/)
  t.match(show.out, /\[Context compacted\]/, 'the compacted transcript')
  const view = json(await cli(['sessions', 'show', '--json', id!], env))
  t.equal(view.turn_count, 5)
  t.equal(view.compaction.compactions, 1)

  const hits = await cli(['memory', 'search', 'launch code PELICAN'], env)
  t.equal(hits.code, 0, hits.err)
  t.match(
    hits.out,
    /^\d\.\d{3}  [0-9a-f-]{36}  session [0-9a-f-]{36}, turn 1\n +The launch code is PELICAN-42\.\n/,
    'what compaction discarded is searchable',
  )
  const scoped = json(await cli(['--json', 'memory', 'search', '--session', id!, '--scope', 'session', '--limit', '2', 'PELICAN'], env))
  t.equal(scoped.results.length, 2)
  t.ok(scoped.results.every((h: any) => h.session_id === id))
  const unscoped = await cli(['memory', 'search', '--scope', 'session', 'x'], env)
  t.equal(unscoped.code, exit('INVALID_REQUEST'))

  const fromStdin = await cli(['resume', id!, '-'], env, { stdin: 'a prompt from stdin\n' })
  t.equal(fromStdin.out, 'echo: a prompt from stdin\n')
  t.equal((await cli(['resume', id!, '-'], env, { stdin: '\n' })).code, exit('INVALID_REQUEST'), 'an empty prompt on stdin')

  const archived = await cli(['sessions', 'archive', id!], env)
  t.equal(archived.out, `Archived session ${id}.\n`)
  const onArchived = await cli(['resume', id!, 'more'], env)
  t.equal(onArchived.code, exit('SESSION_ARCHIVED'))
  t.match(onArchived.err, /^error\[SESSION_ARCHIVED\]: /)
  t.same(json(await cli(['--json', 'resume', id!, 'more'], env)).error.code, 'SESSION_ARCHIVED', '--json errors are JSON on stdout')
  t.same(json(await cli(['--json', 'sessions', 'list', '--status', 'archived'], env)).items.length, 1)

  t.equal((await cli(['sessions', 'delete', id!], env)).out, `Deleted session ${id}.\n`)
  const gone = await cli(['sessions', 'show', id!], env)
  t.equal(gone.code, exit('SESSION_NOT_FOUND'))
  t.match(gone.err, /^error\[SESSION_NOT_FOUND\]: /)
  t.equal((await cli(['sessions', 'show', 'not-a-uuid'], env)).code, exit('INVALID_REQUEST'))
  t.equal((await cli(['--json', 'sessions', 'list'], env)).out.includes(id!), false)
})

t.test('capabilities off: the exact messages and the table exit codes', async (t) => {
  const dir = await tempDir(t, 'cli')
  const noStore = { BURROW_DATA_DIR: dir, BURROW_SESSION_STORE: 'off' }
  const list = await cli(['sessions', 'list'], noStore)
  t.equal(list.out, PERSISTENCE_OFF, 'prints exactly the documented line')
  t.equal(list.err, '')
  t.equal(list.code, exit('SESSION_PERSISTENCE_DISABLED'))
  const asJson = json(await cli(['--json', 'sessions', 'list'], noStore))
  t.same(asJson, { error: { code: 'SESSION_PERSISTENCE_DISABLED', message: PERSISTENCE_OFF.trim() } })
  const ran = await cli(['run', 'ephemeral works'], noStore)
  t.equal(ran.code, 0)
  t.equal(ran.out, 'echo: ephemeral works\n')
  const resumed = await cli(['resume', '01a201c8-c205-730e-8414-343f4fbd1ab3', 'x'], noStore)
  t.equal(resumed.code, exit('SESSION_PERSISTENCE_DISABLED'))
  t.equal(resumed.err, `error[SESSION_PERSISTENCE_DISABLED]: ${PERSISTENCE_OFF}`)

  const noMemory = await cli(['memory', 'search', 'x'], { BURROW_DATA_DIR: dir, BURROW_MEMORY_STORE: 'off' })
  t.equal(noMemory.code, exit('MEMORY_STORE_DISABLED'))
  t.match(noMemory.err, /^error\[MEMORY_STORE_DISABLED\]: /)
  const noCompaction = await cli(['run', '--session-config', COMPACT, 'x'], { BURROW_DATA_DIR: dir, BURROW_COMPACTION: 'off' })
  t.equal(noCompaction.code, exit('SESSION_COMPACTION_DISABLED'))
  t.equal(noCompaction.err, "error[SESSION_COMPACTION_DISABLED]: Session compaction is disabled (build without 'session-compaction').\n")
})

t.test('auth: the same keys as the server; the data dir belongs to one process', async (t) => {
  const dir = await tempDir(t, 'cli')
  const env = { BURROW_DATA_DIR: dir, BURROW_API_KEYS: 'k1:acme,k2:globex' }
  const noKey = await cli(['sessions', 'list'], env)
  t.equal(noKey.code, exit('UNAUTHORIZED'))
  t.match(noKey.err, /^error\[UNAUTHORIZED\]: /)
  const ran = await cli(['--api-key', 'k1', 'run', 'hi'], env)
  t.equal(ran.code, 0, ran.err)
  t.equal(
    json(await cli(['--json', 'sessions', 'list'], { ...env, BURROW_API_KEY: 'k1' })).items.length,
    1,
    'BURROW_API_KEY from the environment',
  )
  t.equal(json(await cli(['--json', '--api-key', 'k2', 'sessions', 'list'], env)).items.length, 0, 'another tenant sees nothing')

  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb' }, { dataDir: dir })
  t.teardown(() => h.close())
  const locked = await cli(['sessions', 'list'], { BURROW_DATA_DIR: dir })
  t.equal(locked.code, 78, 'EX_CONFIG, like the server')
  t.match(locked.err, /^burrow: The data directory .* is in use by another Burrow process\..*--url/)
  const bad = await cli(['sessions', 'list'], { BURROW_DATA_DIR: dir, BURROW_DURABILITY: 'sometimes' })
  t.equal(bad.code, 78)
  t.match(bad.err, /BURROW_DURABILITY/)
})

t.test('serve on an address in use exits 78 with one line, like the server', async (t) => {
  const h = await startBurrow({})
  t.teardown(() => h.close())
  const port = new URL(h.url).port
  const r = await cli(['serve', '--port', port], { BURROW_DATA_DIR: await tempDir(t, 'cli'), HOST: '127.0.0.1' })
  t.equal(r.code, 78)
  t.match(r.err, new RegExp(`^burrow: Cannot listen on 127\\.0\\.0\\.1:${port} \\(EADDRINUSE\\)`))
  t.equal(r.err.trim().split('\n').length, 1)
})

t.test('--url: the same commands through the typed client against a server', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb', BURROW_MEMORY_STORE: 'hnsw', BURROW_COMPACTION: 'on' })
  t.teardown(() => h.close())
  const env = { BURROW_URL: h.url }
  const first = await cli(['run', '--session-config', COMPACT, 'over http'], env)
  t.equal(first.code, 0, first.err)
  t.equal(first.out, 'echo: over http\n')
  const id = /session ([0-9a-f-]{36})/.exec(first.err)![1]!
  let sawCompaction = false
  for (let i = 0; i < 4; i++) {
    const r = await cli(['resume', id, `Tell me about gardens and rivers, topic ${i}, at some length please`], env)
    t.equal(r.code, 0, r.err)
    sawCompaction ||= r.err.includes('[compaction completed')
  }
  t.ok(sawCompaction, 'compaction events arrive over SSE too')
  const view = json(await cli(['--json', 'sessions', 'show', id], env))
  t.equal(view.turn_count, 5)
  const viaRest = (await h.api.get(`/v1/sessions/${id}`)).body
  t.same(view.messages, viaRest.messages, 'the CLI shows what REST shows')
  t.equal(json(await cli(['--json', '--url', h.url, 'sessions', 'list'], {})).items.length, 1, '--url flag')

  const missing = await cli(['sessions', 'show', '01a201c8-c205-730e-8414-343f4fbd1ab3'], env)
  t.equal(missing.code, exit('SESSION_NOT_FOUND'))
  t.match(missing.err, /^error\[SESSION_NOT_FOUND\]: /)
  t.equal((await cli(['sessions', 'list', '--status', 'gone'], env)).code, exit('INVALID_REQUEST'))
  const down = await cli(['--url', 'http://127.0.0.1:9', 'sessions', 'list'], {})
  t.equal(down.code, exit('INTERNAL'))
  t.match(down.err, /^error\[INTERNAL\]: /)
  t.equal((await cli(['--url', 'ftp://x', 'sessions', 'list'], {})).code, 78)

  // Model settings and the busy policy of a turn, over the typed client.
  const stopped = await cli(['resume', id, '--settings', '{"stop":["STOP"]}', '--on-busy', 'queue', 'one two STOP three'], env)
  t.equal(stopped.code, 0, stopped.err)
  t.equal(stopped.out, 'echo: one two \n')
  const shaped = json(
    await cli(
      [
        '--json',
        'resume',
        id,
        '--settings',
        '{"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","properties":{"n":{"type":"integer","minimum":3}}}}}}',
        'x',
      ],
      env,
    ),
  )
  t.same(shaped.output_json, { n: 3 })
  const badPolicy = await cli(['resume', id, '--on-busy', 'later', 'x'], env)
  t.equal(badPolicy.code, exit('INVALID_REQUEST'))
  t.match(badPolicy.err, /on_busy/)
})

t.test('Ctrl-C interrupts the running turn', async (t) => {
  const fake = await startFakeLlm({ openaiKey: 'k' })
  t.teardown(() => fake.close())
  fake.enqueue({ text: 'a long answer that never ends', hang: 'body' })
  const env = {
    BURROW_DATA_DIR: await tempDir(t, 'cli'),
    OPENAI_API_KEY: 'k',
    OPENAI_BASE_URL: `${fake.url}/v1`,
    BURROW_PROVIDER_TIMEOUT_MS: '60000',
  }
  let ctrlC: (() => void) | undefined
  const running = cli(['run', '--model', 'openai:gpt-4o-mini', 'hi'], env, {
    wrap: (host) => ({
      ...host,
      onInterrupt: (cb) => {
        ctrlC = cb
        return () => {
          ctrlC = undefined
        }
      },
    }),
  })
  while (!ctrlC || fake.requests.length === 0) await new Promise((r) => setTimeout(r, 10))
  ctrlC()
  const r = await running
  t.match(r.err, /\[interrupting the turn…\]/)
  t.equal(r.code, exit('INTERRUPTED'), r.err)
  t.match(r.err, /error\[INTERRUPTED\]/)
  t.equal(ctrlC, undefined, 'the handler is removed after the turn')
})

t.test('rpc and mcp on stdio, in-process', async (t) => {
  const env = { BURROW_DATA_DIR: await tempDir(t, 'cli') }
  const lines = [
    { jsonrpc: '2.0', id: 1, method: 'session/create', params: {} },
    { jsonrpc: '2.0', id: 2, method: 'session/list', params: { limit: 0 } },
    { jsonrpc: '2.0', id: 3, method: 'nope/nope' },
  ]
    .map((l) => JSON.stringify(l))
    .join('\n')
  const r = await cli(['rpc'], env, { stdin: `${lines}\nnot json\n` })
  t.equal(r.code, 0)
  const out = r.out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
  const byId = new Map(out.map((m: any) => [m.id, m]))
  t.match(byId.get(1), { result: { session_id: /^[0-9a-f-]{36}$/ } })
  t.match(byId.get(2), { error: { code: -32602, data: { code: 'INVALID_REQUEST', field: 'params/limit' } } })
  t.match(byId.get(3), { error: { code: -32601, data: { code: 'ROUTE_NOT_FOUND' } } })
  t.match(byId.get(null), { error: { code: -32700 } })
  t.equal(r.err, '', 'nothing but protocol on stdio')

  const id = byId.get(1).result.session_id
  const turn = await cli(['rpc'], env, {
    stdin: `${JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'session/resume', params: { session_id: id, input: 'streamed' } })}\n`,
  })
  const msgs = turn.out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
  t.same(
    msgs
      .filter((m) => m.method === 'event')
      .map((m) => m.params.type)
      .filter((x, i, a) => a.indexOf(x) === i),
    ['turn_started', 'text_delta', 'assistant_message', 'turn_completed'],
    'events as notifications before the response',
  )
  t.match(msgs.at(-1), { id: 9, result: { status: 'completed', output_text: 'echo: streamed' } })

  const init = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
  }
  const call = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'session_read', arguments: { session_id: id } } }
  const mcp = await cli(['mcp'], env, {
    stdin: [init, { jsonrpc: '2.0', method: 'notifications/initialized' }, call].map((m) => JSON.stringify(m)).join('\n') + '\n',
  })
  const answers = mcp.out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
  t.match(answers[0], { id: 1, result: { serverInfo: { name: 'burrow' } } })
  t.match(answers[1], { id: 2, result: { structuredContent: { session_id: id, turn_count: 1 } } })
})

t.test('the real executable: stdout, stderr and the exit status', async (t) => {
  const dir = await tempDir(t, 'cli')
  const off = await spawnCli(['sessions', 'list'], { BURROW_DATA_DIR: dir, BURROW_SESSION_STORE: 'off' })
  t.equal(off.out, PERSISTENCE_OFF)
  t.equal(off.code, exit('SESSION_PERSISTENCE_DISABLED'))
  const run = await spawnCli(['run', '-'], { BURROW_DATA_DIR: dir }, 'from a pipe')
  t.equal(run.code, 0, run.err)
  t.equal(run.out, 'echo: from a pipe\n')
  const missing = await spawnCli(['sessions', 'show', '01a201c8-c205-730e-8414-343f4fbd1ab3'], { BURROW_DATA_DIR: dir })
  t.equal(missing.code, exit('SESSION_NOT_FOUND'))
  t.equal(missing.err, 'error[SESSION_NOT_FOUND]: Session 01a201c8-c205-730e-8414-343f4fbd1ab3 not found.\n')
})
