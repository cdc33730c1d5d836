import t from 'tap'
import { once } from 'node:events'
import { copyFileSync, readdirSync, statSync, truncateSync, writeFileSync } from 'node:fs'
import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MEMORY_GUIDE } from '../../../src/session/memory-tools.js'
import { SUMMARY_PREFIX } from '../../../src/core/compactor.js'
import { Api, eventually, startBurrow, type Harness } from '../../helpers/harness.js'
import { spawnServer } from '../../helpers/child-server.js'
import { createHash } from 'node:crypto'
import hnsw from 'hnswlib-node'
import { HashedEmbedder } from '../../../src/memory/hashed-embedder.js'
import { inspectIndexFile } from '../../../src/memory/index-file.js'

const MEM = { BURROW_SESSION_STORE: 'lmdb', BURROW_MEMORY_STORE: 'hnsw', BURROW_COMPACTION: 'on', BURROW_DURABILITY: 'relaxed' }
const COMPACT_FAST = { auto_compact_threshold: 150, recent_turn_budget: 1, min_turns_between_compactions: 0 }

async function events(h: Harness, id: string, api = h.api) {
  const view = (await api.get(`/v1/sessions/${id}`)).body
  const s = await api.sse(`/v1/sessions/${id}/events?after=0`)
  const frames = await s.until((f) => f.data.seq === view.last_seq)
  s.close()
  return frames.filter((f) => f.id).map((f) => f.data)
}

t.test('memory over REST: add, search, scope, validation', async (t) => {
  const h = await startBurrow(MEM)
  t.teardown(() => h.close())
  const { api } = h
  t.equal((await api.get('/v1/capabilities')).body.memory_store, true)
  const sid = await api.createSession()
  const added = await api.post('/v1/memory', [
    { content: 'The staging database password rotates every Friday at 18:00.', metadata: { source: 'runbook' } },
    { content: 'Customer ACME-9931 asked for an invoice copy in Portuguese.', session_id: sid },
    { content: 'Quarterly planning happens in the second week of each quarter.' },
  ])
  t.equal(added.status, 201)
  t.equal(added.body.ids.length, 3)
  const r = await api.get(`/v1/memory/search?q=${encodeURIComponent('when does the staging password change?')}&limit=2`)
  t.equal(r.status, 200)
  t.match(r.body.results[0], { content: /rotates every Friday/, session_id: null, turn: null, seq: null })
  t.ok(r.body.results.length <= 2)
  const exact = await api.get('/v1/memory/search?q=ACME-9931')
  t.match(exact.body.results[0], { content: /ACME-9931/, session_id: sid })
  const scoped = await api.get(`/v1/memory/search?q=invoice&session_id=${sid}&scope=session`)
  t.ok(scoped.body.results.every((x: any) => x.session_id === sid))
  const bad = [
    ['/v1/memory/search?q=x&scope=session', 'query/session_id'],
    ['/v1/memory/search?q=x&limit=21', 'querystring/limit'],
    ['/v1/memory/search', 'querystring/q'],
    ['/v1/memory/search?q=x&scope=planet', 'querystring/scope'],
  ]
  for (const [url, field] of bad) {
    const b = await api.get(url!)
    t.equal(b.status, 400, url!)
    t.equal(b.body.field, field)
  }
  const unknown = await api.get('/v1/memory/search?q=x&session_id=01900000-0000-7000-8000-000000000009')
  t.equal(unknown.status, 404)
  t.equal(unknown.body.code, 'SESSION_NOT_FOUND')
  const empty = await api.post('/v1/memory', [])
  t.equal(empty.status, 400)
})

t.test('compaction → indexing → recall by the agent in another session of the tenant', async (t) => {
  const h = await startBurrow(MEM, { fake: true })
  t.teardown(() => h.close())
  const { api, fake } = h
  fake.autoSummaries = true
  const a = await api.createSession({ model: 'openai:gpt-4o-mini', memory: true, compaction: COMPACT_FAST })
  const facts = [
    'My daughter Inês starts school on September 9th.',
    'The build server is called tortoise-02 and runs Debian.',
    'Budget approval for project Halcyon came through at 42,000 euros.',
  ]
  for (const f of facts) {
    fake.enqueue({ text: `Noted: ${f}` })
    await api.turn(a, { input: f })
  }
  for (let i = 0; i < 3; i++) {
    fake.enqueue({ text: `ok ${i}` })
    await api.turn(a, { input: `filler message number ${i} to move the history along` })
  }
  await h.burrow.indexer!.idle()
  const evA = await events(h, a)
  const indexed = evA.filter((e) => e.type === 'memory_indexed')
  t.ok(indexed.length >= 1, 'memory_indexed was recorded')
  t.ok(indexed.every((e) => e.data.entries > 0))
  t.ok(evA.some((e) => e.type === 'compaction_completed'))

  // The agent in a new session searches memory with its built-in tool, inside the loop.
  const b = await api.createSession({ model: 'openai:gpt-4o-mini', memory: true })
  fake.enqueue(
    { toolCalls: [{ name: 'memory_search', input: { query: 'what is the build server called?' } }] },
    { text: 'It is tortoise-02.' },
  )
  const r = await api.turn(b, { input: 'Which machine builds our code?' })
  t.equal(r.status, 200)
  t.equal(r.body.status, 'completed', 'no requires_action: the tool ran inside the loop')
  t.equal(r.body.output_text, 'It is tortoise-02.')
  const toolMsg = r.body.messages.find((m: any) => m.content.some((c: any) => c.type === 'tool_result'))
  const results = JSON.parse(toolMsg.content[0].content)
  t.match(results[0], { content: /tortoise-02/, session_id: a })
  t.type(results[0].turn, 'number')
  t.type(results[0].seq, 'number')
  t.ok(results[0].score > 0 && results[0].score <= 1)
  const src = evA.find((e) => e.seq === results[0].seq)
  t.ok(src && JSON.stringify(src.data).includes('tortoise-02'), 'seq points back at the verbatim event')

  // Memory is offered with a guide, only to sessions with memory on.
  const call = fake.requests
    .filter((x) => x.api === 'openai')
    .find((x) => JSON.stringify(x.body).includes('Which machine builds our code?'))!
  t.match(call.body.messages[0].content, MEMORY_GUIDE.slice(0, 40))
  t.same(call.body.tools.map((x: any) => x.function.name).sort(), ['memory_search', 'note_delete', 'note_set'])
  const plain = await api.createSession({ model: 'openai:gpt-4o-mini' })
  fake.enqueue({ text: 'plain' })
  await api.turn(plain, { input: 'no memory here' })
  const plainCall = fake.requests.at(-1)!
  t.notOk(plainCall.body.tools, 'no memory tools without memory: true')
  t.notMatch(JSON.stringify(plainCall.body.messages), /long-term memory/)

  // What is indexed: user and assistant text, not the summaries.
  const all = await api.get(`/v1/memory/search?q=${encodeURIComponent(SUMMARY_PREFIX.slice(0, 30))}&limit=20`)
  t.notOk(
    all.body.results.some((x: any) => x.content.startsWith('[Context compacted]')),
    'summaries are not memories',
  )
})

t.test('memory is strictly tenant-scoped', async (t) => {
  const h = await startBurrow({ ...MEM, BURROW_API_KEYS: 'ka:alpha,kb:beta' }, { fake: true })
  t.teardown(() => h.close())
  const alpha = new Api(h.url, 'ka')
  const beta = new Api(h.url, 'kb')
  await alpha.post('/v1/memory', [{ content: 'Alpha secret: the vault combination is 31-07-99.' }])
  const mine = await alpha.get('/v1/memory/search?q=vault combination')
  t.match(mine.body.results[0].content, /31-07-99/)
  const theirs = await beta.get('/v1/memory/search?q=vault combination 31-07-99')
  t.same(theirs.body.results, [], 'beta finds nothing of alpha')
  const bs = await beta.createSession({ model: 'openai:gpt-4o-mini', memory: true })
  h.fake.enqueue({ toolCalls: [{ name: 'memory_search', input: { query: 'vault combination', scope: 'tenant' } }] }, { text: 'nothing' })
  const r = await beta.turn(bs, { input: 'what is the vault combination?' })
  const toolMsg = r.body.messages.find((m: any) => m.content.some((c: any) => c.type === 'tool_result'))
  t.same(JSON.parse(toolMsg.content[0].content), [], "beta's agent cannot recall alpha's memory")
  const as = await alpha.createSession()
  const probe = await beta.get(`/v1/memory/search?q=x&session_id=${as}`)
  t.equal(probe.status, 404, "another tenant's session id is not found")
})

t.test('deleting a session purges its memories', async (t) => {
  const h = await startBurrow(MEM)
  t.teardown(() => h.close())
  const sid = await h.api.createSession()
  await h.api.post('/v1/memory', [
    { content: 'Ephemeral fact: the kettle is broken.', session_id: sid },
    { content: 'Lasting fact: the kettle is blue.' },
  ])
  t.equal((await h.api.get('/v1/memory/search?q=kettle')).body.results.length, 2)
  await h.api.delete(`/v1/sessions/${sid}`)
  const after = (await h.api.get('/v1/memory/search?q=kettle')).body.results
  t.same(
    after.map((x: any) => x.content),
    ['Lasting fact: the kettle is blue.'],
  )
})

t.test('memory survives a restart and kill -9', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'burrow-mem-kill-'))
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const env = { ...MEM, BURROW_DURABILITY: 'fsync', BURROW_DATA_DIR: dataDir }
  let server = await spawnServer(env)
  let api = new Api(server.url)
  await api.post('/v1/memory', [{ content: 'Acknowledged before the crash: the lighthouse keeper is named Odile.' }])
  let exit = once(server.child, 'exit')
  server.child.kill('SIGKILL')
  await exit
  server = await spawnServer(env)
  api = new Api(server.url)
  const r = await api.get('/v1/memory/search?q=lighthouse keeper')
  t.match(r.body.results[0].content, /Odile/, 'an acknowledged entry survives kill -9 (the index is rebuilt from LMDB)')
  await api.post('/v1/memory', [{ content: 'Added after the restart: the harbour opens at dawn.' }])
  exit = once(server.child, 'exit')
  server.child.kill('SIGTERM')
  await exit
  server = await spawnServer(env)
  api = new Api(server.url)
  const files = await readdir(join(dataDir, 'memory', 'hnsw'))
  t.ok(
    files.some((f) => /\.2\.bin$/.test(f)),
    'the clean stop saved the index, covering both entries',
  )
  const both = await api.get('/v1/memory/search?q=harbour lighthouse&limit=5')
  t.equal(both.body.results.length, 2, 'the saved index is loaded and complete')
  // Entries newer than the saved index survive a crash: on open they are added from LMDB.
  await api.post('/v1/memory', [{ content: 'Added after the snapshot: the ferry leaves at noon.' }])
  exit = once(server.child, 'exit')
  server.child.kill('SIGKILL')
  await exit
  server = await spawnServer(env)
  api = new Api(server.url)
  const all = await api.get('/v1/memory/search?q=harbour lighthouse ferry&limit=5')
  t.equal(all.body.results.length, 3)
  t.ok(all.body.results.some((x: any) => /ferry/.test(x.content)))
  exit = once(server.child, 'exit')
  server.child.kill('SIGTERM')
  await exit
})

t.test(
  'a damaged memory index file is rebuilt from LMDB: adds and searches answer normally, and a retried add adds nothing twice',
  async (t) => {
    const env = { ...MEM, BURROW_API_KEYS: 'ka:alpha,kb:beta' }
    const dim = new HashedEmbedder().dimensions
    // Index files are named after a hash of the tenant (see tenantKey in src/memory/tenant-index-cache.ts).
    const tenantKey = (tenant: string) => createHash('sha256').update(tenant).digest('hex').slice(0, 24)
    const alphaKey = tenantKey('alpha')
    const betaKey = tenantKey('beta')
    const indexDir = (dataDir: string) => join(dataDir, 'memory', 'hnsw')
    const filesOf = (dataDir: string, key: string) => readdirSync(indexDir(dataDir)).filter((f) => f.startsWith(`${key}.`))
    const seeded = (n: number) => {
      let x = 3
      return Buffer.from(Array.from({ length: n }, () => ((x = (x * 1103515245 + 12345) % 2 ** 31) >>> 16) & 255))
    }
    const damages: Array<[string, (file: string, dataDir: string) => void]> = [
      ['truncated', (f) => truncateSync(f, Math.floor(statSync(f).size / 2))],
      ['zero-length', (f) => truncateSync(f, 0)],
      ['random bytes', (f) => writeFileSync(f, seeded(statSync(f).size))],
      [
        'built for another dimension',
        (f) => {
          const other = new hnsw.HierarchicalNSW('cosine', dim / 2)
          other.initIndex({ maxElements: 16, m: 16, efConstruction: 200, randomSeed: 100 })
          for (let l = 0; l < 3; l++)
            other.addPoint(
              Array.from({ length: dim / 2 }, (_, i) => (i === l ? 1 : 0)),
              l,
            )
          other.writeIndexSync(f)
        },
      ],
      [
        "another tenant's (whole, and plausible: beta's labels are alpha's too)",
        (f, dataDir) => copyFileSync(join(indexDir(dataDir), filesOf(dataDir, betaKey)[0]!), f),
      ],
    ]
    const alphaFacts = [
      'The vault in Lisbon opens with the code saffron-47.',
      'Our espresso machine is descaled every second Tuesday.',
      'The tram to Belém leaves from Praça da Figueira.',
    ]
    const betaFacts = [
      'Beta keeps its spare keys under the blue flowerpot.',
      'Beta lunch orders go out at 11:30.',
      'The beta printer is called inkwell-9.',
    ]
    const damageWarnings = (logs: any[]) =>
      logs.filter((l) => l.level === 40 && l.msg === 'memory index file is damaged: rebuilding the index from LMDB')

    for (const [name, damage] of damages) {
      t.test(name, async (t) => {
        const dataDir = await mkdtemp(join(tmpdir(), 'burrow-mem-damage-'))
        t.teardown(() => rm(dataDir, { recursive: true, force: true }))
        let h = await startBurrow(env, { dataDir })
        t.equal(
          (
            await new Api(h.url, 'ka').post(
              '/v1/memory',
              alphaFacts.map((content) => ({ content })),
            )
          ).status,
          201,
        )
        t.equal(
          (
            await new Api(h.url, 'kb').post(
              '/v1/memory',
              betaFacts.map((content) => ({ content })),
            )
          ).status,
          201,
        )
        await h.close()
        const [file] = filesOf(dataDir, alphaKey)
        t.equal(file, `${alphaKey}.3.bin`, 'the clean stop saved the index')
        damage(join(indexDir(dataDir), file!), dataDir)

        // The first use of alpha's index after the damage is an add.
        h = await startBurrow(env, { dataDir })
        const alpha = new Api(h.url, 'ka')
        const body = [{ content: 'Added after the damage: the lighthouse key hangs by the door, tag LH-2291.' }]
        const first = await alpha.post('/v1/memory', body, { headers: { 'idempotency-key': `damage-${name}` } })
        t.equal(first.status, 201)
        const retry = await alpha.post('/v1/memory', body, { headers: { 'idempotency-key': `damage-${name}` } })
        t.same(retry.body, first.body, 'the retry answers the first result')
        const found = await alpha.get(`/v1/memory/search?q=${encodeURIComponent('LH-2291 lighthouse key')}&limit=10`)
        t.equal(found.status, 200)
        t.equal(found.body.results.filter((r: any) => r.content.includes('LH-2291')).length, 1, 'stored once')
        const vault = await alpha.get(`/v1/memory/search?q=${encodeURIComponent('how do I open the vault in Lisbon?')}&limit=10`)
        t.equal(vault.status, 200)
        t.match(vault.body.results[0].content, /saffron-47/, 'the right passage first')
        t.same(
          vault.body.results.map((r: any) => r.content).sort(),
          [...alphaFacts, body[0]!.content].sort(),
          "all of alpha's entries, none of beta's",
        )
        const warnings = damageWarnings(h.logs)
        t.equal(warnings.length, 1, 'one warning')
        t.match(warnings[0], { tenant_key: alphaKey, file: join(indexDir(dataDir), file!) })
        await h.close()

        // Repaired: a fresh, whole file, which the next start loads without a word.
        t.same(
          filesOf(dataDir, alphaKey).sort(),
          [`${alphaKey}.3.bin.damaged`, `${alphaKey}.4.bin`],
          'the damaged file was moved aside, a fresh one saved',
        )
        t.equal(inspectIndexFile(join(indexDir(dataDir), `${alphaKey}.4.bin`), { dim, labelsBelow: 4 }).elements, 4)
        h = await startBurrow(env, { dataDir })
        t.match((await new Api(h.url, 'ka').get('/v1/memory/search?q=espresso descaled')).body.results[0].content, /espresso/)
        t.same(damageWarnings(h.logs), [], 'loaded without a warning')
        await h.close()
      })
    }
  },
)

t.test('session notes: REST, the agent, pinned through compaction', async (t) => {
  const h = await startBurrow(MEM, { fake: true })
  t.teardown(() => h.close())
  const { api, fake } = h
  fake.autoSummaries = true
  const id = await api.createSession({ model: 'anthropic:claude-sonnet-4-5', memory: true, compaction: COMPACT_FAST })
  const put = await api.call('PUT', `/v1/sessions/${id}/notes/deadline`, { body: { value: 'Ship by Friday' } })
  t.equal(put.status, 200)
  t.match(put.body, { key: 'deadline', value: 'Ship by Friday' })
  t.same((await api.get(`/v1/sessions/${id}/notes/deadline`)).body.value, 'Ship by Friday')
  t.equal((await api.get(`/v1/sessions/${id}/notes/nope`)).body.code, 'NOTE_NOT_FOUND')
  t.equal((await api.call('PUT', `/v1/sessions/${id}/notes/bad%20key`, { body: { value: 'x' } })).body.field, 'params/key')
  t.equal((await api.call('PUT', `/v1/sessions/${id}/notes/long`, { body: { value: 'x'.repeat(2001) } })).body.field, 'body/value')

  // The agent sets a note with its tool; notes are pinned into every call, also after compaction.
  fake.enqueue({ toolCalls: [{ name: 'note_set', input: { key: 'user_name', value: 'Marguerite' } }] }, { text: 'I will remember.' })
  const r = await api.turn(id, { input: 'My name is Marguerite.' })
  t.equal(r.body.output_text, 'I will remember.')
  for (let i = 0; i < 4; i++) {
    fake.enqueue({ text: `reply ${i}` })
    await api.turn(id, { input: `more words to grow the history, round ${i}` })
  }
  const view = (await api.get(`/v1/sessions/${id}`)).body
  t.ok(view.compaction.compactions >= 1, 'compacted')
  t.same(
    view.notes.map((n: any) => [n.key, n.value]),
    [
      ['deadline', 'Ship by Friday'],
      ['user_name', 'Marguerite'],
    ],
  )
  const last = fake.requests.filter((x) => x.api === 'anthropic').at(-1)!
  t.match(last.body.system, /Session notes[\s\S]*- deadline: Ship by Friday[\s\S]*- user_name: Marguerite/, 'pinned into the system prompt')

  const del = await api.delete(`/v1/sessions/${id}/notes/deadline`)
  t.equal(del.status, 204)
  t.same(
    (await api.get(`/v1/sessions/${id}/notes`)).body.notes.map((n: any) => n.key),
    ['user_name'],
  )
  const types = (await events(h, id)).map((e) => e.type)
  t.ok(types.includes('note_set') && types.includes('note_deleted'), 'note changes are events in the log')
})

t.test('notes keep at most 200, evicting the oldest; archived sessions are read-only', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb', BURROW_DURABILITY: 'relaxed' })
  t.teardown(() => h.close())
  const id = await h.api.createSession()
  for (let i = 0; i < 205; i++) await h.api.call('PUT', `/v1/sessions/${id}/notes/k${i}`, { body: { value: `v${i}` } })
  const notes = (await h.api.get(`/v1/sessions/${id}/notes`)).body.notes
  t.equal(notes.length, 200)
  t.equal(notes[0].key, 'k5', 'the five oldest were evicted')
  await h.api.call('PUT', `/v1/sessions/${id}/notes/k5`, { body: { value: 'updated' } })
  t.equal((await h.api.get(`/v1/sessions/${id}/notes`)).body.notes.at(-1).key, 'k5', 'an update makes a note the newest')
  await h.api.post(`/v1/sessions/${id}/archive`)
  t.equal((await h.api.call('PUT', `/v1/sessions/${id}/notes/x`, { body: { value: 'y' } })).body.code, 'SESSION_ARCHIVED')
  t.equal((await h.api.get(`/v1/sessions/${id}/notes/k6`)).status, 200, 'still readable')
})

t.test('an OpenAI-compatible embeddings endpoint; changing the embedder re-indexes', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'burrow-embed-'))
  const { startFakeLlm } = await import('../../helpers/fake-llm-server.js')
  const fake = await startFakeLlm({ openaiKey: 'sk-test' })
  t.teardown(async () => {
    await fake.close()
    await rm(dataDir, { recursive: true, force: true })
  })
  // First with the offline embedder...
  let h = await startBurrow(MEM, { dataDir })
  await h.api.post('/v1/memory', [{ content: 'The orchard has forty pear trees.' }, { content: 'The boat is moored at pier seven.' }])
  await h.close()
  // ...then with an endpoint: the stored entries are embedded again, never mixed with the old vectors.
  // (BURROW_EMBEDDER is set too: the URL overrides it, with a warning.)
  h = await startBurrow(
    {
      ...MEM,
      BURROW_EMBEDDER: 'use-lite',
      BURROW_EMBEDDINGS_URL: `${fake.url}/v1`,
      BURROW_EMBEDDINGS_MODEL: 'text-embedding-3-small',
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: `${fake.url}/v1`,
    },
    { dataDir },
  )
  t.ok(
    h.logs.some(
      (l) =>
        l.level === 40 &&
        l.msg === 'BURROW_EMBEDDINGS_URL overrides BURROW_EMBEDDER: memory embeds through the endpoint' &&
        l.ignored === 'BURROW_EMBEDDER=use-lite',
    ),
  )
  t.teardown(() => h.close())
  t.ok(
    h.logs.some(
      (l) =>
        l.msg === 'embedder changed: memory vectors are made again in the background' &&
        String(l.to).startsWith('openai:text-embedding-3-small@'),
    ),
  )
  const r = await h.api.get('/v1/memory/search?q=pear trees orchard')
  t.match(r.body.results[0].content, /pear trees/, 'the keyword side finds it whatever the vectors are')
  // The tenant's first use starts embedding its stored entries again, through the endpoint.
  const calls = await eventually(() => {
    const c = fake.requests.filter((r) => r.path === '/v1/embeddings')
    return c.some((r) => Array.isArray(r.body.input) && r.body.input.includes('The orchard has forty pear trees.')) ? c : undefined
  })
  t.ok(calls!.length >= 2, 'probed, then re-embedded the stored entries')
  t.equal(calls![0]!.headers.authorization, 'Bearer sk-test', 'the OpenAI key goes to the OpenAI host it belongs to')
  await h.api.post('/v1/memory', [{ content: 'A third fact, embedded by the endpoint.' }])
  t.equal((await h.api.get('/v1/memory/search?q=third fact&limit=5')).body.results.length, 3)
})

t.test('an embeddings endpoint that does not answer fails start-up clearly', async (t) => {
  const { loadConfig } = await import('../../../src/app/config.js')
  const { createBurrow } = await import('../../../src/app/burrow.js')
  const { createLogger } = await import('../../../src/app/logger.js')
  const { StartupError } = await import('../../../src/app/startup-error.js')
  const dataDir = await mkdtemp(join(tmpdir(), 'burrow-embed-down-'))
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const config = loadConfig({
    ...MEM,
    BURROW_DATA_DIR: dataDir,
    PORT: '0',
    BURROW_EMBEDDINGS_URL: 'http://127.0.0.1:9/v1',
    BURROW_EMBEDDINGS_MODEL: 'm',
  })
  const err = await createBurrow(config, { logger: createLogger('silent'), defaultMetrics: false }).catch((e: unknown) => e)
  t.type(err, StartupError)
  t.match((err as Error).message, /embeddings endpoint http:\/\/127\.0\.0\.1:9\/v1 .* did not answer/)
  t.throws(() => loadConfig({ BURROW_EMBEDDINGS_URL: 'http://x/v1' }), /BURROW_EMBEDDINGS_MODEL/)
})

t.test('managing memory over REST: ids and metadata on hits, filters, paging, get, delete', async (t) => {
  const h = await startBurrow({ ...MEM, BURROW_API_KEYS: 'ka:alpha,kb:beta' })
  t.teardown(() => h.close())
  const alpha = new Api(h.url, 'ka')
  const beta = new Api(h.url, 'kb')
  const sid = await alpha.createSession()
  const docs = Array.from({ length: 9 }, (_, i) => ({
    content: `Runbook step ${i}: restart the ingest worker and check the queue depth.`,
    metadata: { source: i % 3 === 0 ? 'wiki' : 'runbook', 'doc.part': String(i) },
    ...(i < 4 ? { session_id: sid } : {}),
  }))
  const added = await alpha.post('/v1/memory', docs)
  t.equal(added.status, 201)
  const ids: string[] = added.body.ids

  const hits = await alpha.get('/v1/memory/search?q=restart%20ingest%20worker&limit=20')
  t.equal(hits.body.results.length, 9)
  for (const hit of hits.body.results) {
    const i = ids.indexOf(hit.id)
    t.ok(i >= 0, 'a hit maps back to what was added')
    t.same(hit.metadata, docs[i]!.metadata)
  }
  const wiki = await alpha.get('/v1/memory/search?q=restart%20ingest%20worker&limit=2&metadata.source=wiki')
  t.equal(wiki.body.results.length, 2, 'limit hits among the matching ones')
  t.ok(wiki.body.results.every((x: any) => x.metadata.source === 'wiki'))
  const two = await alpha.get('/v1/memory/search?q=restart&metadata.source=wiki&metadata.doc.part=3')
  t.same(
    two.body.results.map((x: any) => x.id),
    [ids[3]],
    'every pair must match',
  )

  const seen: string[] = []
  let url: string | null = '/v1/memory?limit=4'
  while (url) {
    const page: any = await alpha.get(url)
    t.equal(page.status, 200)
    t.ok(page.body.items.length <= 4)
    seen.push(...page.body.items.map((e: any) => e.id))
    url = page.body.next_cursor ? `/v1/memory?limit=4&cursor=${page.body.next_cursor}` : null
  }
  t.same(seen, ids, 'paging to the end: every entry once, in insertion order')
  const bySession = await alpha.get(`/v1/memory?session_id=${sid}&metadata.source=runbook`)
  t.same(
    bySession.body.items.map((e: any) => e.id),
    [ids[1], ids[2]],
  )
  t.equal(bySession.body.next_cursor, null)

  const one = await alpha.get(`/v1/memory/${ids[5]}`)
  t.equal(one.status, 200)
  t.match(one.body, {
    id: ids[5],
    content: /Runbook step 5/,
    session_id: null,
    turn: null,
    seq: null,
    metadata: docs[5]!.metadata,
    created_at: String,
  })

  // Another tenant's id answers exactly like an unknown one.
  const unknown = '01900000-0000-7000-8000-00000000beef'
  for (const [api, id] of [
    [beta, ids[5]],
    [alpha, unknown],
  ] as const) {
    const g = await api.get(`/v1/memory/${id}`)
    const d = await api.delete(`/v1/memory/${id}`)
    t.match([g.status, g.body.code, d.status, d.body.code], [404, 'MEMORY_NOT_FOUND', 404, 'MEMORY_NOT_FOUND'])
    t.equal(g.body.detail, (await alpha.get(`/v1/memory/${unknown}`)).body.detail)
  }
  t.equal((await alpha.get(`/v1/memory/${ids[5]}`)).status, 200, "beta's delete did not touch alpha's entry")
  t.same((await beta.get('/v1/memory')).body, { items: [], next_cursor: null })

  const del = await alpha.delete(`/v1/memory/${ids[3]}`)
  t.equal(del.status, 204)
  t.equal((await alpha.get(`/v1/memory/${ids[3]}`)).status, 404)
  t.equal((await alpha.delete(`/v1/memory/${ids[3]}`)).status, 404)
  const after = await alpha.get('/v1/memory/search?q=restart%20ingest%20worker%20step%203&limit=20')
  t.notOk(
    after.body.results.some((x: any) => x.id === ids[3]),
    'a deleted entry is no longer found',
  )
  t.equal(after.body.results.length, 8)
  t.equal((await alpha.get('/v1/memory?limit=100')).body.items.length, 8)

  const bad = [
    ['/v1/memory/search?q=x&metadata.b%20d=1', 'query/metadata.b d'],
    [`/v1/memory?metadata.k=${'v'.repeat(257)}`, `query/metadata.k`],
    [`/v1/memory?metadata.${'k'.repeat(65)}=v`, `query/metadata.${'k'.repeat(65)}`],
    ['/v1/memory?cursor=nonsense', 'query/cursor'],
    ['/v1/memory?limit=101', 'querystring/limit'],
    ['/v1/memory?color=red', 'querystring/color'],
    ['/v1/memory/not-a-uuid', 'params/id'],
  ]
  for (const [u, field] of bad) {
    const b = await alpha.get(u!)
    t.equal(b.status, 400, u!)
    t.equal(b.body.field, field, u!)
  }
})

t.test('POST /v1/memory honours Idempotency-Key', async (t) => {
  const h = await startBurrow(MEM)
  t.teardown(() => h.close())
  const { api } = h
  const body = [{ content: 'The office closes at 17:30 on Fridays.' }, { content: 'Badges are renewed every January.' }]
  const headers = { 'idempotency-key': 'mem-add-1' }
  const first = await api.post('/v1/memory', body, { headers })
  t.equal(first.status, 201)
  const again = await api.post('/v1/memory', body, { headers })
  t.equal(again.status, 201)
  t.same(again.body.ids, first.body.ids, 'the retry returns the first ids')
  t.equal((await api.get('/v1/memory?limit=100')).body.items.length, 2, 'and adds nothing')
  const other = await api.post('/v1/memory', [{ content: 'Something else entirely.' }], { headers })
  t.equal(other.status, 422)
  t.equal(other.body.code, 'IDEMPOTENCY_CONFLICT')
  t.equal((await api.get('/v1/memory?limit=100')).body.items.length, 2)
})

t.test('without the memory store the management routes are MEMORY_STORE_DISABLED', async (t) => {
  const h = await startBurrow({ BURROW_MEMORY_STORE: 'off' })
  t.teardown(() => h.close())
  const id = '01900000-0000-7000-8000-00000000beef'
  for (const r of [await h.api.get('/v1/memory'), await h.api.get(`/v1/memory/${id}`), await h.api.delete(`/v1/memory/${id}`)]) {
    t.equal(r.status, 501)
    t.equal(r.body.code, 'MEMORY_STORE_DISABLED')
  }
})

t.test('POST /v1/memory answers before the vector index takes the entries; /metrics shows the backlog until it has', async (t) => {
  const h = await startBurrow(MEM)
  t.teardown(() => h.close())
  const backlog = async () => Number(/^burrow_memory_index_backlog (\d+)$/m.exec(await (await fetch(`${h.url}/metrics`)).text())?.[1])
  t.equal(await backlog(), 0, 'nothing waits before any entry')
  const texts = Array.from(
    { length: 1000 },
    (_, i) => `Entry ${i}: the ${['barn', 'mill', 'forge', 'quay'][i % 4]} log number ${(i * 37) % 1000} was signed by clerk ${i % 23}.`,
  )
  t.equal(
    (
      await h.api.post(
        '/v1/memory',
        texts.map((content) => ({ content })),
      )
    ).status,
    201,
  )
  const waiting = await backlog()
  t.ok(waiting > 0 && waiting <= 1000, `the answer did not wait for the index (${waiting} entries still waiting)`)
  const hit = (await h.api.get(`/v1/memory/search?q=${encodeURIComponent(texts[999]!)}&limit=1`)).body.results[0]
  t.equal(hit?.content, texts[999], 'the last entry is found at once')
  t.ok(await eventually(async () => (await backlog()) === 0, 30_000), 'and the index catches up')
})
