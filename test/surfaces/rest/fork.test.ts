// POST /v1/sessions/{id}/fork on LMDB and PostgreSQL: a new session with the source's history up
// to an event and `forked_from` in its view and in the list; the source untouched; a fork inside
// a paused turn closes that turn (no orphaned tool call) and takes its next turn; forks survive a
// restart; bad requests get their codes.
import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { checkHistory } from '../../../src/core/messages.js'
import { Api, startBurrow, type Harness } from '../../helpers/harness.js'
import { durableStores } from '../../helpers/stores.js'

const MODEL = 'openai:gpt-4o-mini'
const WEATHER = { name: 'get_weather', description: 'Weather for a city', input_schema: { type: 'object', properties: {} } }
const STORES = durableStores('fork')

for (const [store, storeEnv] of STORES)
  t.test(store, async (t) => {
    const env = { ...(await storeEnv(t)), BURROW_API_KEYS: 'key-a:tenantA,key-b:tenantB' }
    const dataDir = await mkdtemp(join(tmpdir(), 'burrow-fork-'))
    t.teardown(() => rm(dataDir, { recursive: true, force: true }))
    let h: Harness = await startBurrow(env, { dataDir, fake: true })
    t.teardown(() => h.close())
    let api = new Api(h.url, 'key-a')

    t.test('fork now and fork back in time; the source is untouched', async (t) => {
      const id = await api.createSession({ system_prompt: 'Be kind.', metadata: { origin: 'yes' } })
      const first = await api.turn(id, { input: 'first question' })
      await api.turn(id, { input: 'second question' })
      const source = (await api.get(`/v1/sessions/${id}`)).body

      const now = await api.post(`/v1/sessions/${id}/fork`)
      t.equal(now.status, 201)
      t.equal(now.headers.location, `/v1/sessions/${now.body.session_id}`)
      t.not(now.body.session_id, id)
      t.same(now.body.forked_from, { session_id: id, seq: source.last_seq }, 'provenance in the view')
      t.same(now.body.messages, source.messages, 'the whole history')
      t.same([now.body.system_prompt, now.body.metadata, now.body.turn_count], ['Be kind.', { origin: 'yes' }, 2])

      const back = await api.post(`/v1/sessions/${id}/fork`, { at_seq: first.body.last_seq })
      t.equal(back.status, 201)
      t.same(back.body.messages, source.messages.slice(0, 2), 'rewound to the end of the first turn')
      t.equal(back.body.last_seq, first.body.last_seq)
      const next = await api.turn(back.body.session_id, { input: 'another second question' })
      t.equal(next.status, 200, 'the fork takes its own turns')
      t.equal(next.body.turn, 2)

      t.same((await api.get(`/v1/sessions/${id}`)).body, source, 'the source is untouched')
      const list = (await api.get('/v1/sessions?limit=10')).body.items
      t.same(list.find((s: any) => s.session_id === back.body.session_id)?.forked_from, { session_id: id, seq: first.body.last_seq })
      t.equal(list.find((s: any) => s.session_id === id)?.forked_from, null, 'provenance in the list too')
      const log = (await api.get(`/v1/sessions/${back.body.session_id}/event-log?after=0`)).body.events
      t.match(log[0], { type: 'session_created', seq: 1, data: { config: { forked_from: { session_id: id } } } })
    })

    t.test('a fork inside a paused turn answers its pending tool call and takes its next turn', async (t) => {
      const id = await api.createSession({ model: MODEL, tools: [WEATHER] })
      h.fake.enqueue({ toolCalls: [{ name: 'get_weather', input: { city: 'Oslo' } }] })
      const paused = await api.turn(id, { input: 'weather in Oslo?' })
      t.equal(paused.body.status, 'requires_action')
      const fork = await api.post(`/v1/sessions/${id}/fork`)
      t.equal(fork.status, 201)
      t.same(fork.body.pending_tool_calls, [], 'nothing left pending in the fork')
      t.equal(checkHistory(fork.body.messages), null, 'its history is valid for a provider')
      const log = (await api.get(`/v1/sessions/${fork.body.session_id}/event-log?after=0`)).body.events
      t.match(log.slice(-2), [
        { type: 'tool_result', data: { is_error: true, synthetic: true } },
        { type: 'turn_failed', data: { code: 'INTERRUPTED', reason: 'forked' } },
      ])
      h.fake.enqueue({ text: 'no weather then' })
      t.equal((await api.turn(fork.body.session_id, { input: 'never mind' })).status, 200)
      t.equal((await api.get(`/v1/sessions/${id}`)).body.pending_tool_calls.length, 1, 'the source still waits for its tool result')
    })

    t.test('bad requests, other tenants, narrow tokens; a fork survives a restart', async (t) => {
      const id = await api.createSession()
      const last = (await api.get(`/v1/sessions/${id}`)).body.last_seq
      const code = async (r: Promise<any>, status: number, c: string) => {
        const res = await r
        t.equal(res.status, status)
        t.equal(res.body.code, c)
      }
      await code(api.post(`/v1/sessions/${id}/fork`, { at_seq: last + 1 }), 400, 'INVALID_REQUEST')
      await code(api.post(`/v1/sessions/${id}/fork`, { at_seq: 0 }), 400, 'INVALID_REQUEST')
      await code(api.post(`/v1/sessions/${id}/fork`, { turn: 1 }), 400, 'INVALID_REQUEST')
      await code(new Api(h.url, 'key-b').post(`/v1/sessions/${id}/fork`), 404, 'SESSION_NOT_FOUND')
      const sessionToken = (await api.post('/v1/tokens', { scope: 'write', session_id: id })).body.token
      await code(new Api(h.url, sessionToken).post(`/v1/sessions/${id}/fork`), 403, 'FORBIDDEN')
      const key = { headers: { 'idempotency-key': 'fork-once' } }
      const once = await api.post(`/v1/sessions/${id}/fork`, {}, key)
      const twice = await api.post(`/v1/sessions/${id}/fork`, {}, key)
      t.equal(twice.body.session_id, once.body.session_id, 'a retry with the same key returns the same fork')

      const port = new URL(h.url).port
      await h.close()
      h = await startBurrow({ ...env, PORT: port }, { dataDir, fake: true })
      api = new Api(h.url, 'key-a')
      const after = await api.get(`/v1/sessions/${once.body.session_id}`)
      t.same(after.body.forked_from, { session_id: id, seq: last }, 'after a restart')
      t.equal((await api.turn(once.body.session_id, { input: 'still here' })).status, 200)
    })
  })
