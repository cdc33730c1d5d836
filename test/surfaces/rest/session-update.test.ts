// PATCH /v1/sessions/{id} and the session list's filters, on LMDB and on PostgreSQL: a change is
// a `session_updated` event (the log still rebuilds the session), effective from the next turn,
// kept across a restart; metadata merges (null removes); every bad request is refused with its
// code and changes nothing; GET /v1/sessions filters by metadata, by creation and activity time.
import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { EventEnvelope } from '../../../src/core/events.js'
import type { SessionRecord } from '../../../src/core/session-record.js'
import { applyEvent } from '../../../src/session/session-reducer.js'
import { Api, sleep, startBurrow, type Harness } from '../../helpers/harness.js'
import { durableStores } from '../../helpers/stores.js'

const MODEL = 'openai:gpt-4o-mini'
const STORES = durableStores('session_update')

/** The session rebuilt from its event log by the reducer alone. */
async function rebuilt(api: Api, id: string): Promise<SessionRecord> {
  const events: EventEnvelope[] = (await api.get(`/v1/sessions/${id}/event-log?after=0&limit=1000`)).body.events
  let r: SessionRecord | undefined
  for (const e of events) r = applyEvent(r, e)
  return r!
}

for (const [store, storeEnv] of STORES)
  t.test(store, async (t) => {
    const env = { ...(await storeEnv(t)), BURROW_COMPACTION: 'on', BURROW_API_KEYS: 'key-a:tenantA,key-b:tenantB' }
    const dataDir = await mkdtemp(join(tmpdir(), 'burrow-update-'))
    t.teardown(() => rm(dataDir, { recursive: true, force: true }))
    let h: Harness = await startBurrow(env, { dataDir, fake: true })
    t.teardown(() => h.close())
    let api = new Api(h.url, 'key-a')

    t.test('a change is recorded, effective from the next turn, and kept across a restart', async (t) => {
      const id = await api.createSession({ model: MODEL, system_prompt: 'Old prompt.', metadata: { team: 'red', stage: 'draft' } })
      const tool = { name: 'lookup', description: 'Look a thing up.', input_schema: { type: 'object', properties: {} } }
      const r = await api.patch(`/v1/sessions/${id}`, {
        metadata: { stage: 'review', team: null, owner: 'ana' },
        system_prompt: 'New prompt.',
        tools: [tool],
        compaction: { recent_turn_budget: 1 },
      })
      t.equal(r.status, 200)
      t.same(r.body.metadata, { stage: 'review', owner: 'ana' }, 'metadata merged: set, changed, removed')
      t.equal(r.body.system_prompt, 'New prompt.')
      t.same(r.body.tools, [tool])
      t.equal(r.body.compaction.config.recent_turn_budget, 1)
      const before = (await api.get(`/v1/sessions/${id}`)).body.compaction.config
      t.equal(before.auto_compact_threshold, r.body.compaction.config.auto_compact_threshold, 'other compaction settings kept')

      const log = (await api.get(`/v1/sessions/${id}/event-log?after=0`)).body.events
      t.match(log.at(-1), {
        type: 'session_updated',
        turn: 0,
        data: { changes: { metadata: { stage: 'review', owner: 'ana' }, system_prompt: 'New prompt.', tools: [tool] } },
      })
      t.same((await rebuilt(api, id)).config, { ...(await rebuilt(api, id)).config, system_prompt: 'New prompt.', tools: [tool] })

      h.fake.enqueue({ text: 'answered' })
      t.equal((await api.turn(id, { input: 'hello' })).status, 200)
      const sent = h.fake.requests.at(-1)!.body
      t.equal(sent.messages[0].content, 'New prompt.', 'the next turn runs with the new system prompt')
      t.ok(
        sent.tools.some((x: any) => x.function.name === 'lookup'),
        'and the new tools',
      )

      const same = await api.patch(`/v1/sessions/${id}`, { system_prompt: 'New prompt.', metadata: { owner: 'ana' } })
      t.equal(same.status, 200)
      t.equal((await api.get(`/v1/sessions/${id}`)).body.last_seq, same.body.last_seq)
      const after = (await api.get(`/v1/sessions/${id}/event-log?after=0`)).body.events
      t.equal(after.filter((e: any) => e.type === 'session_updated').length, 1, 'a change that changes nothing records nothing')

      const port = new URL(h.url).port
      await h.close()
      h = await startBurrow({ ...env, PORT: port }, { dataDir, fake: true })
      api = new Api(h.url, 'key-a')
      const view = (await api.get(`/v1/sessions/${id}`)).body
      t.same([view.system_prompt, view.metadata, view.tools], ['New prompt.', { stage: 'review', owner: 'ana' }, [tool]], 'after a restart')
      t.same((await rebuilt(api, id)).config.metadata, view.metadata, 'the log rebuilds it')
    })

    t.test('bad requests are refused with their code and change nothing', async (t) => {
      const id = await api.createSession({ metadata: { a: '1' } })
      const lastSeq = (await api.get(`/v1/sessions/${id}`)).body.last_seq
      const refused = async (body: unknown, code: string, status: number, who = api) => {
        const r = await who.patch(`/v1/sessions/${id}`, body)
        t.equal(r.status, status, `${JSON.stringify(body).slice(0, 60)}: ${status}`)
        t.equal(r.body.code, code)
      }
      await refused({}, 'INVALID_REQUEST', 400)
      await refused({ model: 'openai:gpt-4o' }, 'INVALID_REQUEST', 400)
      await refused({ metadata: { a: 7 } }, 'INVALID_REQUEST', 400)
      await refused({ metadata: Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`k${i}`, 'v'])) }, 'INVALID_REQUEST', 400)
      const tool = { name: 'dup', input_schema: { type: 'object' } }
      await refused({ tools: [tool, tool] }, 'INVALID_REQUEST', 400)
      await refused({ metadata: { b: '2' } }, 'SESSION_NOT_FOUND', 404, new Api(h.url, 'key-b'))
      const readOnly = (await api.post('/v1/tokens', { scope: 'read' })).body.token
      await refused({ metadata: { b: '2' } }, 'FORBIDDEN', 403, new Api(h.url, readOnly))
      t.equal((await api.get(`/v1/sessions/${id}`)).body.last_seq, lastSeq, 'nothing was recorded')
      t.same((await api.get(`/v1/sessions/${id}`)).body.metadata, { a: '1' })

      const merge = await api.call('PATCH', `/v1/sessions/${id}`, {
        rawBody: '{"metadata":{"b":"2"}}',
        contentType: 'application/merge-patch+json',
      })
      t.equal(merge.status, 200, 'application/merge-patch+json is accepted')
      t.same(merge.body.metadata, { a: '1', b: '2' })

      const key = { headers: { 'idempotency-key': 'patch-once' } }
      const first = await api.patch(`/v1/sessions/${id}`, { metadata: { c: '3' } }, key)
      const again = await api.patch(`/v1/sessions/${id}`, { metadata: { c: '3' } }, key)
      t.same(again.body, first.body, 'a retry with the same Idempotency-Key returns the first answer')
      t.equal((await api.patch(`/v1/sessions/${id}`, { metadata: { c: '4' } }, key)).body.code, 'IDEMPOTENCY_CONFLICT')

      t.equal((await api.post(`/v1/sessions/${id}/archive`)).status, 200)
      await refused({ metadata: { d: '4' } }, 'SESSION_ARCHIVED', 409)
    })

    t.test('while a turn runs: metadata changes, the other settings wait', async (t) => {
      const id = await api.createSession({ model: MODEL })
      h.fake.enqueue({ text: 'slow answer', chunkSize: 2, delayMs: 40 })
      const turn = api.turn(id, { input: 'take your time' })
      await sleep(150)
      const busy = await api.patch(`/v1/sessions/${id}`, { system_prompt: 'Too late.' })
      t.equal(busy.status, 409)
      t.equal(busy.body.code, 'SESSION_BUSY')
      const labelled = await api.patch(`/v1/sessions/${id}`, { metadata: { watched: 'yes' } })
      t.equal(labelled.status, 200, 'metadata can change at any time')
      t.equal((await turn).status, 200)
      const view = (await api.get(`/v1/sessions/${id}`)).body
      t.same([view.system_prompt, view.metadata], ['', { watched: 'yes' }])
      t.equal((await api.patch(`/v1/sessions/${id}`, { system_prompt: 'Now.' })).body.system_prompt, 'Now.', 'once the turn has ended')
    })

    t.test('the list filters by metadata, by creation and activity time', async (t) => {
      const other = new Api(h.url, 'key-b')
      const t0 = new Date().toISOString()
      await sleep(5)
      const a = await other.createSession({ metadata: { project: 'apollo', tier: 'gold' } })
      const b = await other.createSession({ metadata: { project: 'apollo', tier: 'silver' } })
      await sleep(5)
      const t1 = new Date().toISOString()
      await sleep(5)
      const c = await other.createSession({ metadata: { project: 'gemini' } })
      await sleep(5)
      const t2 = new Date().toISOString()
      await sleep(5)
      await other.turn(a, { input: 'activity' })
      const ids = async (query: string) => {
        const r = await other.get(`/v1/sessions?${query}`)
        t.equal(r.status, 200, query)
        return r.body.items.map((s: any) => s.session_id)
      }
      t.same(await ids('metadata.project=apollo'), [b, a], 'newest first')
      t.same(await ids('metadata.project=apollo&metadata.tier=gold'), [a], 'every pair must match')
      t.same(await ids('metadata.project=mercury'), [])
      t.same(await ids(`created_after=${t0}`), [c, b, a])
      t.same(await ids(`created_after=${t0}&created_before=${t1}`), [b, a])
      t.same(await ids(`created_before=${encodeURIComponent(t1.replace('Z', '+00:00'))}&created_after=${t0}`), [b, a], 'any offset')
      t.same(await ids(`updated_after=${t2}`), [a], 'by last activity')
      t.same(await ids(`metadata.project=apollo&status=archived`), [])
      const page1 = await other.get('/v1/sessions?metadata.project=apollo&limit=1')
      t.same(
        page1.body.items.map((s: any) => s.session_id),
        [b],
      )
      t.same(await ids(`metadata.project=apollo&limit=1&cursor=${page1.body.next_cursor}`), [a], 'paged')
      t.same(await ids('metadata.project=apollo'), [b, a])
      t.notOk((await api.get('/v1/sessions?metadata.project=apollo')).body.items.length, "another tenant's sessions never match")
      const bad = await other.get('/v1/sessions?created_after=yesterday')
      t.equal(bad.status, 400)
      t.equal(bad.body.code, 'INVALID_REQUEST')
      t.equal((await other.get('/v1/sessions?metadata.bad%20key=x')).body.code, 'INVALID_REQUEST')
    })
  })
