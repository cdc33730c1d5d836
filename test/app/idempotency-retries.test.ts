// What a retry with the same Idempotency-Key and body sees after a kill -9, case by case, on a
// real server process (LMDB, and PostgreSQL) talking to the fake LLM server: a request cut while
// the model was answering gets the turn recovery closed, not a new run; the request that paused
// a turn gets the pause; tool_results that completed the turn get the completion; a manual
// compaction cut around its commit is answered from the log, never summarised twice. The model is
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
import { FULL } from '../helpers/thoroughness.js'

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
  const env = {
    ...store,
    BURROW_MEMORY_STORE: 'off',
    BURROW_COMPACTION: 'on',
    OPENAI_API_KEY: 'k',
    OPENAI_BASE_URL: `${fake.url}/v1`,
    LOG_LEVEL: 'info',
  }
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

  // 4. A manual compaction cut by kill -9 at moments around its commit: a retry answers the
  // compaction the log holds, or runs it once when none was committed — never a second summary.
  const compact = `/v1/sessions/${id}/compact`
  const completed = async () =>
    (await api.get(`/v1/sessions/${id}/event-log?after=0&limit=1000`)).body.events.filter((e: any) => e.type === 'compaction_completed')
      .length
  // 'event': the kill follows the compaction_completed frame, which is sent once its commit is durable.
  // npm test: a kill right after the fake answered (which catches a separate outcome write) and one on the event.
  const moments: Array<'event' | number> = FULL ? ['event', 'event', 'event', 0, 10] : [0, 'event']
  for (const delay of moments) {
    for (let i = 0; i < 3; i++) {
      fake.enqueue({ text: `answer ${delay}.${i}` })
      t.equal((await api.post(turns, { input: `more ${delay}.${i} ${'words '.repeat(50)}` })).body.status, 'completed')
    }
    const k = key(`compact-${fake.requests.length}`)
    const summaries = await completed()
    fake.enqueue({ text: `summary ${delay}` })
    const calls = fake.requests.length
    const stream = await api.sse(`/v1/sessions/${id}/events`)
    const first = api.post(compact, undefined, k).catch((err: unknown) => err)
    if (delay === 'event') {
      await stream.until((f) => f.event === 'compaction_completed', 10_000)
      server.child.kill('SIGKILL')
    } else {
      await eventually(() => fake.requests.length > calls, 10_000)
      await new Promise((r) => setTimeout(r, delay))
    }
    stream.close()
    await restart()
    await first
    const committed = (await completed()) - summaries
    t.ok(committed <= 1, `delay ${delay} ms: at most one compaction committed before the kill`)
    if (committed === 0) fake.enqueue({ text: `summary ${delay} again` })
    const retried = await api.post(compact, undefined, k)
    t.equal(retried.status, 200, `delay ${delay} ms: the retry answers`)
    t.equal(retried.body.compacted, true, `delay ${delay} ms: with the compaction`)
    t.equal((await completed()) - summaries, 1, `delay ${delay} ms: one compaction in the log (${committed} before the retry)`)
    t.equal(fake.requests.length, calls + 2 - committed, `delay ${delay} ms: the model summarised once`)
    const again = await api.post(compact, undefined, k)
    t.same(again.body, retried.body, `delay ${delay} ms: a second retry answers the same`)
  }
}

async function kill(server: ChildServer): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return
  const exit = once(server.child, 'exit')
  server.child.kill('SIGKILL')
  await exit
}
