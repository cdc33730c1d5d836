// What a retry with the same Idempotency-Key and body sees after a kill -9, case by case, on a
// real server process (LMDB, and PostgreSQL) talking to the fake LLM server: a request cut while
// the model was answering gets the turn recovery closed, not a new run; the request that paused
// a turn gets the pause; tool_results that completed the turn get the completion. The model is
// called once for each (counted at the fake provider), and the log holds one run per key.
import t, { type Test } from 'tap'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Api, eventually } from '../helpers/harness.js'
import { spawnServer, type ChildServer } from '../helpers/child-server.js'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { tempDatabase } from '../helpers/pg.js'
import { sameAnswer } from '../helpers/answers.js'

const TOOLS = [{ name: 'lookup', input_schema: { type: 'object' } }]

t.test('retries after kill -9 answer the first outcome (LMDB)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-idem-retry-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  await retries(t, { BURROW_SESSION_STORE: 'lmdb', BURROW_DATA_DIR: dir })
})

t.test('retries after kill -9 answer the first outcome (PostgreSQL)', async (t) => {
  const db = await tempDatabase(t, 'idemretry')
  const dir = await mkdtemp(join(tmpdir(), 'burrow-idem-retry-pg-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  // Restarted under the same replica id, as a supervisor restarts a replica: its leases end at start-up.
  await retries(t, { BURROW_SESSION_STORE: 'postgres', BURROW_DATABASE_URL: db.url, BURROW_DATA_DIR: dir, BURROW_REPLICA_ID: 'retry' })
})

async function retries(t: Test, store: Record<string, string>): Promise<void> {
  const fake = await startFakeLlm({ openaiKey: 'k' })
  t.teardown(() => fake.close())
  const env = { ...store, BURROW_MEMORY_STORE: 'off', OPENAI_API_KEY: 'k', OPENAI_BASE_URL: `${fake.url}/v1`, LOG_LEVEL: 'info' }
  let server = await spawnServer(env)
  t.teardown(() => kill(server))
  let api = new Api(server.url)
  const restart = async () => {
    await kill(server)
    server = await spawnServer(env)
    api = new Api(server.url)
  }
  const key = (k: string) => ({ headers: { 'idempotency-key': k } })
  const id = (await api.post('/v1/sessions', { model: 'openai:gpt-4o-mini', tools: TOOLS })).body.session_id
  const turns = `/v1/sessions/${id}/turns`

  // 1. Cut while the model answers: recovery closes the turn, and that is the key's outcome.
  fake.enqueue({ hang: 'headers' })
  const calls = fake.requests.length
  const cut = api.post(turns, { input: 'slow' }, key('cut')).catch((err: unknown) => err)
  await eventually(() => fake.requests.length > calls, 10_000)
  await restart()
  t.type(await cut, Error, 'the first attempt got no answer')
  const closed = await api.post(turns, { input: 'slow' }, key('cut'))
  t.equal(closed.status, 409)
  t.equal(closed.body.code, 'INTERRUPTED')
  t.match(closed.body.data, { reason: 'process_restarted', turn: 1, replayed: true }, 'the turn recovery closed, not a new run')
  t.equal(fake.requests.length, calls + 1, 'the model was called once')

  // 2. The request that paused a turn, cut after the pause was committed: the retry gets the pause.
  fake.enqueue({ toolCalls: [{ name: 'lookup', input: { q: 1 } }] })
  const paused = await api.post(turns, { input: 'look it up' }, key('pause'))
  t.equal(paused.body.status, 'requires_action')
  await restart()
  const pausedAgain = await api.post(turns, { input: 'look it up' }, key('pause'))
  t.equal(pausedAgain.status, 200, 'not SESSION_BUSY')
  t.same(sameAnswer(pausedAgain.body), sameAnswer(paused.body), 'the same pause, the same tool calls')

  // 3. tool_results that completed the turn: the retry gets the completion, not "no turn is waiting".
  fake.enqueue({ text: 'found it' })
  const body = { tool_results: [{ tool_call_id: paused.body.tool_calls[0].id, content: 'result' }] }
  const done = await api.post(turns, body, key('results'))
  t.equal(done.body.status, 'completed')
  await restart()
  const doneAgain = await api.post(turns, body, key('results'))
  t.equal(doneAgain.status, 200)
  t.same(sameAnswer(doneAgain.body), sameAnswer(done.body), 'the same completion')

  // One run per key in the log.
  const log = (await api.get(`/v1/sessions/${id}/event-log?after=0&limit=500`)).body.events
  const keys = log.filter((e: any) => e.type === 'turn_started').map((e: any) => e.data.idempotency?.key)
  t.same(keys, ['cut', 'pause', 'results'], 'each key ran once')
  const before = fake.requests.length
  t.same(sameAnswer((await api.post(turns, body, key('results'))).body), sameAnswer(done.body))
  t.equal(fake.requests.length, before, 'a retry calls no model')
}

async function kill(server: ChildServer): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return
  const exit = once(server.child, 'exit')
  server.child.kill('SIGKILL')
  await exit
}
