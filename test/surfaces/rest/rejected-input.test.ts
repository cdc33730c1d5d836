// A turn whose request the provider refuses as such (HTTP 400/413/422) must not poison the
// session: the turn fails with PROVIDER_ERROR, its messages leave the history (never sent
// again), the log keeps them visible under a turn_failed marked `input_rejected`, and the next
// turn succeeds. Both wire formats, JSON and SSE answers, ephemeral and LMDB (across a restart).
import t from 'tap'
import { startBurrow, MODES, type Harness } from '../../helpers/harness.js'
import type { FakeApi } from '../../helpers/fake-llm-server.js'

const POISON = 'please look at this image the provider cannot take'

function sentTexts(h: Harness, api: FakeApi): string[] {
  return h.fake.requests.filter((r) => r.api === api).map((r) => JSON.stringify(r.body))
}

for (const mode of MODES) {
  for (const api of ['openai', 'anthropic'] as const) {
    const model = api === 'openai' ? 'openai:gpt-4o-mini' : 'anthropic:claude-sonnet-4-5'
    t.test(`${mode.name} / ${api}: a rejected input is rolled back and never sent again`, async (t) => {
      const h = await startBurrow(mode.env, { fake: true })
      t.teardown(() => h.close())
      const id = await h.api.createSession({ model })
      h.fake.enqueue({ api, text: 'first answer' })
      t.equal((await h.api.turn(id, { input: 'hello' })).status, 200)

      for (const status of [400, 413, 422]) {
        h.fake.enqueue({ api, status, errorMessage: `refused with ${status}` })
        const r = await h.api.turn(id, { input: `${POISON} (${status})` })
        t.equal(r.status, 502, `HTTP ${status} from the provider`)
        t.equal(r.body.code, 'PROVIDER_ERROR')
        t.match(r.body.detail, `refused with ${status}`)
      }
      // Streamed: the turn's SSE answer ends with the failure, marked rejected.
      h.fake.enqueue({ api, status: 400, errorMessage: 'refused, streamed' })
      const s = await h.api.sse(`/v1/sessions/${id}/turns`, { method: 'POST', body: { input: `${POISON} (sse)` } })
      const frames = await s.until((f) => f.event === 'turn_failed')
      const failed = frames.at(-1)!.data
      t.equal(failed.data.code, 'PROVIDER_ERROR')
      t.equal(failed.data.reason, 'input_rejected')
      t.match(failed.data.message, 'refused, streamed')

      h.fake.enqueue({ api, text: 'all good again' })
      const next = await h.api.turn(id, { input: 'are you still there?' })
      t.equal(next.status, 200, 'the next turn succeeds')
      t.equal(next.body.output_text, 'all good again')
      const last = sentTexts(h, api).at(-1)!
      t.notOk(last.includes(POISON), 'the rejected inputs are not sent again')
      t.ok(last.includes('hello') && last.includes('first answer'), 'the history before them is')

      // The log keeps what was rejected, marked, with the provider's message.
      const log = (await h.api.get(`/v1/sessions/${id}/event-log?after=0&limit=500`)).body.events as any[]
      const rejected = log.filter((e) => e.type === 'turn_failed' && e.data.reason === 'input_rejected')
      t.equal(rejected.length, 4)
      for (const f of rejected) {
        const [from, to] = f.data.rejected_seq_range
        const inRange = log.filter((e) => e.seq >= from && e.seq <= to)
        t.ok(
          inRange.some((e) => e.type === 'turn_started' && JSON.stringify(e.data.input).includes(POISON)),
          'the range holds the rejected input',
        )
        t.equal(to, f.seq - 1)
      }
      if (mode.persistent) {
        const view = (await h.api.get(`/v1/sessions/${id}`)).body
        t.notOk(JSON.stringify(view.messages).includes(POISON), 'the view shows the history the model sees')
        t.equal(view.messages.length, 4)
      }
    })
  }
}

t.test('lmdb: a rejected turn with tool calls rolls back whole, across a restart, and the store agrees with the log', async (t) => {
  const first = await startBurrow(MODES[1].env, { fake: true })
  const dataDir = first.dataDir
  const fake = first.fake
  t.teardown(async () => {
    await fake.close()
  })
  const id = await first.api.createSession({ model: 'openai:gpt-4o-mini', tools: [{ name: 'look', input_schema: { type: 'object' } }] })
  fake.enqueue({ api: 'openai', text: 'ok' })
  t.equal((await first.api.turn(id, { input: 'before' })).status, 200)
  // The model calls a client tool; the client's result is what the provider refuses.
  fake.enqueue({ api: 'openai', toolCalls: [{ id: 'call_1', name: 'look', input: {} }] })
  const paused = await first.api.turn(id, { input: POISON })
  t.equal(paused.body.status, 'requires_action')
  fake.enqueue({ api: 'openai', status: 400, errorMessage: 'image too large' })
  const refused = await first.api.turn(id, { tool_results: [{ tool_call_id: 'call_1', content: 'a huge image' }] })
  t.equal(refused.status, 502)
  // In the same commit batch as the rollback, a new turn appends: the store must still hold the right history.
  fake.enqueue({ api: 'openai', text: 'fine' })
  t.equal((await first.api.turn(id, { input: 'after' })).status, 200)
  const before = (await first.api.get(`/v1/sessions/${id}`)).body
  await first.burrow.close()

  const second = await startBurrow(MODES[1].env, { fakeServer: fake, dataDir })
  t.teardown(async () => {
    await second.close()
    await import('node:fs/promises').then((f) => f.rm(dataDir, { recursive: true, force: true }))
  })
  const after = (await second.api.get(`/v1/sessions/${id}`)).body
  t.same(after.messages, before.messages, 'the stored history survives the restart')
  t.notOk(JSON.stringify(after.messages).includes(POISON))
  t.notOk(JSON.stringify(after.messages).includes('a huge image'))
  t.same(
    after.messages.map((m: any) => m.role),
    ['user', 'assistant', 'user', 'assistant'],
  )
  fake.enqueue({ api: 'openai', text: 'still fine' })
  t.equal((await second.api.turn(id, { input: 'again' })).status, 200)
  const sent = JSON.stringify(fake.requests.at(-1)!.body)
  t.notOk(sent.includes(POISON) || sent.includes('call_1'), 'no trace of the rejected turn reaches the provider')
})

t.test('auth errors and rate limits are not rejected inputs', async (t) => {
  const h = await startBurrow(MODES[0].env, { fake: true })
  t.teardown(() => h.close())
  const id = await h.api.createSession({ model: 'openai:gpt-4o-mini' })
  h.fake.enqueue({ api: 'openai', status: 401, errorMessage: 'bad key' })
  const r = await h.api.turn(id, { input: 'keep me' })
  t.equal(r.status, 502)
  h.fake.enqueue({ api: 'openai', text: 'ok' })
  t.equal((await h.api.turn(id, { input: 'next' })).status, 200)
  t.ok(JSON.stringify(h.fake.requests.at(-1)!.body).includes('keep me'), 'a 401 does not roll the input back')
  const log = (await h.api.get(`/v1/sessions/${id}/event-log?after=0&limit=100`)).body.events as any[]
  t.notOk(log.some((e) => e.data?.reason === 'input_rejected'))
})
