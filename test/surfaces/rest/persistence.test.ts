import t from 'tap'
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { createBurrow } from '../../../src/app/burrow.js'
import { loadConfig } from '../../../src/app/config.js'
import { createLogger } from '../../../src/app/logger.js'
import { StartupError } from '../../../src/app/startup-error.js'
import { rebuild } from '../../../src/session/session-reducer.js'
import { toView } from '../../../src/core/views.js'
import { checkHistory } from '../../../src/core/messages.js'
import { startBurrow, eventually, type Harness } from '../../helpers/harness.js'
import { startFakeLlm } from '../../helpers/fake-llm-server.js'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'

const LMDB = { BURROW_SESSION_STORE: 'lmdb' }

async function allEvents(h: Harness, id: string) {
  const s = await h.api.sse(`/v1/sessions/${id}/events?after=0`)
  const view = await h.api.get(`/v1/sessions/${id}`)
  const frames = await s.until((f) => f.data.seq === view.body.last_seq)
  s.close()
  return frames.filter((f) => f.id).map((f) => f.data)
}

t.test('read, list, archive, delete over REST', async (t) => {
  const h = await startBurrow(LMDB, { fake: true })
  t.teardown(() => h.close())
  const { api } = h
  const caps = await api.get('/v1/capabilities')
  t.equal(caps.body.session_store, true)

  const id = await api.createSession({ metadata: { project: 'x' }, tools: [{ name: 'lookup', input_schema: { type: 'object' } }] })
  await api.turn(id, { input: 'hello' })
  const v = await api.get(`/v1/sessions/${id}`)
  t.equal(v.status, 200)
  t.match(v.body, {
    session_id: id,
    status: 'active',
    model: 'offline:echo',
    metadata: { project: 'x' },
    turn_count: 1,
    last_seq: 4,
    messages: [{ role: 'user' }, { role: 'assistant', content: [{ type: 'text', text: 'echo: hello' }] }],
    usage: { by_turn: [{ turn: 1 }] },
    tool_stats: {},
    compaction: null,
    memory: false,
    pending_tool_calls: [],
    running: false,
  })

  t.test('list: newest first, paginated, filtered', async (t) => {
    const ids = [id]
    for (let i = 0; i < 4; i++) ids.push(await api.createSession())
    const p1 = await api.get('/v1/sessions?limit=2')
    t.same(
      p1.body.items.map((i: any) => i.session_id),
      [ids[4], ids[3]],
    )
    const p2 = await api.get(`/v1/sessions?limit=2&cursor=${p1.body.next_cursor}`)
    t.same(
      p2.body.items.map((i: any) => i.session_id),
      [ids[2], ids[1]],
    )
    const p3 = await api.get(`/v1/sessions?limit=2&cursor=${p2.body.next_cursor}`)
    t.same(
      p3.body.items.map((i: any) => i.session_id),
      [ids[0]],
    )
    t.equal(p3.body.next_cursor, null)
    const bad = await api.get('/v1/sessions?cursor=not-ours')
    t.equal(bad.status, 400)
    t.equal(bad.body.field, 'query/cursor')
    const badLimit = await api.get('/v1/sessions?limit=0')
    t.equal(badLimit.body.field, 'querystring/limit')
  })

  t.test('archive: read-only afterwards, a paused turn is closed first', async (t) => {
    const sid = await api.createSession({ tools: [{ name: 'lookup', input_schema: { type: 'object' } }] })
    const paused = await api.turn(sid, { input: '/tool lookup {"q":1}' })
    t.equal(paused.body.status, 'requires_action')
    const a = await api.post(`/v1/sessions/${sid}/archive`)
    t.same(a.body, { session_id: sid, status: 'archived' })
    const again = await api.post(`/v1/sessions/${sid}/archive`)
    t.equal(again.status, 200, 'archiving twice is harmless')
    const turn = await api.turn(sid, { input: 'more' })
    t.equal(turn.status, 409)
    t.equal(turn.body.code, 'SESSION_ARCHIVED')
    const view = await api.get(`/v1/sessions/${sid}`)
    t.equal(view.body.status, 'archived')
    t.equal(checkHistory(view.body.messages), null, 'no dangling tool call in an archived session')
    const types = (await allEvents(h, sid)).map((e) => e.type)
    t.same(types.slice(-3), ['tool_result', 'turn_failed', 'session_archived'])
    const listed = await api.get('/v1/sessions?status=archived')
    t.ok(listed.body.items.some((i: any) => i.session_id === sid))
  })

  t.test('delete: purges the session, its streams and its files', async (t) => {
    const sid = await api.createSession()
    await api.turn(sid, { input: 'to be deleted' })
    await h.burrow.projector!.idle()
    const dir = join(h.dataDir, 'sessions', sid)
    t.ok((await stat(dir)).isDirectory(), 'projected')
    const stream = await api.sse(`/v1/sessions/${sid}/events`)
    const d = await api.delete(`/v1/sessions/${sid}`)
    t.equal(d.status, 204)
    const last = await stream.next()
    t.same(last!.data, { type: 'stream_closed', session_id: sid, data: { reason: 'session_deleted' } })
    t.equal((await api.get(`/v1/sessions/${sid}`)).status, 404)
    t.equal((await api.delete(`/v1/sessions/${sid}`)).status, 404)
    t.equal((await api.sse(`/v1/sessions/${sid}/events?after=0`)).status, 404)
    await h.burrow.projector!.idle()
    await t.rejects(stat(dir), 'the projection files are gone')
  })
})

t.test('restart: sessions, seqs, replay and idempotency survive', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'burrow-restart-'))
  const fake = await startFakeLlm({ openaiKey: 'sk-test', anthropicKey: 'ak-test' })
  t.teardown(async () => {
    await fake.close()
    await rm(dataDir, { recursive: true, force: true })
  })
  let h = await startBurrow(LMDB, { dataDir, fakeServer: fake })
  const id = await h.api.createSession({ model: 'openai:gpt-4o-mini' })
  fake.enqueue({ text: 'first answer' })
  const first = await h.api.turn(id, { input: 'first' }, { headers: { 'idempotency-key': 'k-1' } })
  t.equal(first.status, 200)
  await h.close()

  h = await startBurrow(LMDB, { dataDir, fakeServer: fake })
  t.teardown(() => h.close())
  const calls = fake.requests.length
  const retried = await h.api.turn(id, { input: 'first' }, { headers: { 'idempotency-key': 'k-1' } })
  t.same(retried.body, first.body, 'a retry after a restart returns the stored result')
  t.equal(fake.requests.length, calls, 'without calling the model again')
  const conflict = await h.api.turn(id, { input: 'other' }, { headers: { 'idempotency-key': 'k-1' } })
  t.equal(conflict.body.code, 'IDEMPOTENCY_CONFLICT')

  const replay = await h.api.sse(`/v1/sessions/${id}/events`, { headers: { 'last-event-id': '2' } })
  fake.enqueue({ text: 'second answer' })
  const second = await h.api.post(`/v1/sessions/${id}/resume`, { input: 'second' })
  t.equal(second.status, 200)
  t.equal(second.body.turn, 2)
  t.equal(second.body.first_seq, 5, 'seqs continue after the restart')
  const frames = (await replay.until((f) => f.event === 'turn_completed' && f.data.turn === 2)).filter((f) => f.id)
  t.same(
    frames.map((f) => f.data.seq),
    [3, 4, 5, 6, 7],
    'replay from the log, then live, no gap, no duplicate',
  )
  const v = await h.api.get(`/v1/sessions/${id}`)
  t.equal(v.body.turn_count, 2)
  t.equal(v.body.messages.length, 4)
  t.notOk(fake.requests.at(-1)!.rejected)
})

t.test('resume with no input answers a history that ends with the user', async (t) => {
  const h = await startBurrow(LMDB, { fake: true })
  t.teardown(() => h.close())
  const id = await h.api.createSession({ model: 'openai:gpt-4o-mini' })
  // An outage (not a refusal of the input, which would roll the turn back): the input stays, unanswered.
  h.fake.enqueue({ status: 401, errorMessage: 'nope' })
  const failed = await h.api.turn(id, { input: 'please answer' })
  t.equal(failed.body.code, 'PROVIDER_ERROR')
  h.fake.enqueue({ text: 'answered at last' })
  const r = await h.api.post(`/v1/sessions/${id}/resume`, {})
  t.equal(r.status, 200)
  t.equal(r.body.output_text, 'answered at last')
  t.equal(r.body.turn, 2)
  const again = await h.api.post(`/v1/sessions/${id}/resume`, {})
  t.equal(again.status, 400, 'nothing to answer now')
  t.equal(again.body.code, 'INVALID_REQUEST')
})

t.test('a replay that runs while turns append is gapless and duplicate-free', async (t) => {
  const h = await startBurrow({ ...LMDB, BURROW_EVENT_BUFFER: '16', BURROW_DURABILITY: 'relaxed' })
  t.teardown(() => h.close())
  const id = await h.api.createSession()
  for (let i = 0; i < 150; i++) await h.api.turn(id, { input: `history ${i}` })
  const s = await h.api.sse(`/v1/sessions/${id}/events?after=0`)
  const appending = (async () => {
    for (let i = 0; i < 30; i++) await h.api.turn(id, { input: `live ${i}` })
  })()
  await appending
  const last = (await h.api.get(`/v1/sessions/${id}`)).body.last_seq
  const frames = (await s.until((f) => f.data.seq === last && !!f.id, 10_000)).filter((f) => f.id)
  s.close()
  t.equal(frames.length, last)
  t.ok(
    frames.every((f, i) => f.data.seq === i + 1),
    `seqs 1..${last} exactly once, in order`,
  )
})

t.test("a replay far longer than the live queue is delivered whole, at the reader's pace", async (t) => {
  const h = await startBurrow({ ...LMDB, BURROW_SSE_QUEUE_LIMIT: '16', BURROW_EVENT_BUFFER: '8', BURROW_DURABILITY: 'relaxed' })
  t.teardown(() => h.close())
  const id = await h.api.createSession()
  for (let i = 0; i < 400; i++) await h.api.turn(id, { input: `turn ${i}` })
  const last = (await h.api.get(`/v1/sessions/${id}`)).body.last_seq
  const s = await h.api.sse(`/v1/sessions/${id}/events?after=0`)
  const frames = (await s.until((f) => f.data.seq === last && !!f.id, 20_000)).filter((f) => f.id)
  s.close()
  t.equal(frames.length, last, `${last} events, with a live queue of 16`)
  t.ok(frames.every((f, i) => f.data.seq === i + 1))
})

t.test('projection: files match the log, rebuild is byte-identical', async (t) => {
  const h = await startBurrow(LMDB, { fake: true })
  t.teardown(() => h.close())
  const id = await h.api.createSession({ system_prompt: 'Be kind.', tools: [{ name: 'lookup', input_schema: { type: 'object' } }] })
  await h.api.turn(id, { input: 'first line\nsecond line' })
  const p = await h.api.turn(id, { input: '/tool lookup {"q":"x"}' })
  await h.api.turn(id, { tool_results: [{ tool_call_id: p.body.tool_calls[0].id, content: 'found it' }] })
  await h.burrow.projector!.idle()
  const dir = join(h.dataDir, 'sessions', id)
  const transcript = await readFile(join(dir, 'transcript.md'), 'utf8')
  const json = await readFile(join(dir, 'session.json'), 'utf8')
  t.match(transcript, /^# Session /)
  t.match(transcript, /> first line\n> second line/)
  t.match(transcript, /tool call `lookup`/)
  t.match(transcript, /tool result for `[^`]+`: found it/)
  const view = (await h.api.get(`/v1/sessions/${id}`)).body
  t.same(JSON.parse(json), { ...view, running: false }, 'session.json is the session view')
  await h.burrow.projector!.rebuildAll()
  t.equal(await readFile(join(dir, 'transcript.md'), 'utf8'), transcript, 'transcript rebuilt byte for byte')
  t.equal(await readFile(join(dir, 'session.json'), 'utf8'), json, 'session.json rebuilt byte for byte')
})

t.test('BURROW_PROJECTION=off with LMDB: no files are written, and a deletion removes those written before', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'burrow-projection-off-'))
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const on = await startBurrow(LMDB, { fake: true, dataDir })
  const old = await on.api.createSession()
  await on.api.turn(old, { input: 'projected' })
  await on.close() // a close finishes the projection
  t.match(await readFile(join(dataDir, 'sessions', old, 'transcript.md'), 'utf8'), /projected/, 'on by default')

  const h = await startBurrow({ ...LMDB, BURROW_PROJECTION: 'off' }, { fake: true, dataDir })
  t.teardown(() => h.close())
  const id = await h.api.createSession()
  await h.api.turn(id, { input: 'not projected' })
  await h.burrow.projector!.idle()
  await t.rejects(stat(join(dataDir, 'sessions', id)), 'no files for a session committed with the projection off')
  t.equal((await h.api.delete(`/v1/sessions/${old}`)).status, 204)
  await t.rejects(stat(join(dataDir, 'sessions', old)), "the deleted session's files are gone")
})

t.test('rebuild(log) == snapshot after a long random session', async (t) => {
  const h = await startBurrow({ ...LMDB, BURROW_DURABILITY: 'relaxed' }, { fake: true })
  t.teardown(() => h.close())
  const { api, fake } = h
  let seed = 42
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31
  const tools = [
    { name: 'lookup', input_schema: { type: 'object' } },
    { name: 'save', input_schema: { type: 'object' } },
  ]
  const id = await api.createSession({ model: 'anthropic:claude-sonnet-4-5', tools, max_total_tokens: 10_000_000 })
  let pending: any[] = []
  for (let step = 0; step < 120; step++) {
    const r = rnd()
    if (pending.length > 0) {
      if (r < 0.2) {
        await api.post(`/v1/sessions/${id}/interrupt`)
        pending = []
        continue
      }
      if (r < 0.4) fake.enqueue({ toolCalls: [{ name: 'save', input: { n: step } }] })
      else fake.enqueue({ text: `after tools ${step}` })
      const res = await api.turn(id, {
        tool_results: pending.map((c) => ({ tool_call_id: c.id, content: `result ${step}`, is_error: rnd() < 0.3 })),
      })
      pending = res.body.status === 'requires_action' ? res.body.tool_calls : []
      continue
    }
    if (r < 0.45) fake.enqueue({ text: `answer ${step}`, usage: { input_tokens: 10 + step, output_tokens: 3 } })
    else if (r < 0.7)
      fake.enqueue({
        text: 'let me check',
        toolCalls: [{ name: 'lookup', input: { step } }, ...(rnd() < 0.5 ? [{ name: 'save', input: {} }] : [])],
      })
    else if (r < 0.8) fake.enqueue({ toolCalls: [{ name: 'ghost', input: {} }] }, { text: 'no such tool' })
    else if (r < 0.9) fake.enqueue({ status: 500 }, { status: 500 }, { status: 500 })
    else fake.enqueue({ text: 'cut', malformed: 'truncated' })
    const res = await api.turn(id, { input: `step ${step}` })
    pending = res.status === 200 && res.body.status === 'requires_action' ? res.body.tool_calls : []
  }
  const events = await allEvents(h, id)
  t.ok(events.length > 300, `${events.length} events`)
  const view = (await h.api.get(`/v1/sessions/${id}`)).body
  t.same({ ...toView(rebuild(events)!, false), running: view.running }, view, 'the view rebuilt from the log equals the stored one')
  t.equal(fake.requests.filter((r) => r.rejected).length, 0, 'the provider never rejected a history')
})

t.test('a second process on the same data directory is refused', async (t) => {
  const h = await startBurrow(LMDB)
  t.teardown(() => h.close())
  const config = loadConfig({ ...LMDB, BURROW_MEMORY_STORE: 'off', BURROW_COMPACTION: 'off', BURROW_DATA_DIR: h.dataDir, PORT: '0' })
  const err = await createBurrow(config, { logger: createLogger('silent'), defaultMetrics: false }).catch((e: unknown) => e)
  t.type(err, StartupError)
  t.match((err as Error).message, /in use by another Burrow process/)
  t.equal((await h.api.get('/healthz')).status, 200, 'the first keeps running')
  await eventually(async () => (await h.api.turn(await h.api.createSession(), { input: 'still fine' })).status === 200)
})

t.test('a log that moved under the service is INTERNAL, logged, and the session heals', async (t) => {
  const h = await startBurrow(LMDB)
  t.teardown(() => h.close())
  const id = await h.api.createSession()
  await h.api.turn(id, { input: 'first' })
  // Another writer appends to the log behind this process's back (what the data-dir lock
  // exists to prevent); the live session's next commit then conflicts with the log.
  const repo = (h.burrow.service as unknown as { repo: import('../../../src/core/stores.js').SessionRepository }).repo
  const stored = (await repo.sessions.get(id))!
  const e = {
    seq: stored.last_seq + 1,
    session_id: id,
    turn: 1,
    type: 'memory_indexed' as const,
    at: new Date().toISOString(),
    data: { entries: 0 },
  }
  await repo.commit([e], { ...stored, last_seq: e.seq, updated_at: e.at })
  const r = await h.api.turn(id, { input: 'conflicts' }, { headers: { 'x-request-id': 'req-conflict' } })
  t.equal(r.status, 500)
  t.equal(r.body.code, 'INTERNAL')
  t.equal(r.body.detail, 'Internal error.', 'no internals leak to the client')
  t.notMatch(JSON.stringify(r.body), /seq|order|stack/i)
  t.ok(
    h.logs.some((l) => l.request_id === 'req-conflict' && l.level >= 50 && l.err),
    'the cause is logged with the request id',
  )
  const next = await h.api.turn(id, { input: 'after the conflict' })
  t.equal(next.status, 200, 'the session reloads from the log')
  t.equal(next.body.first_seq, e.seq + 1)
  const events = await allEvents(h, id)
  t.ok(
    events.every((x, i) => x.seq === i + 1),
    'still gapless',
  )
})
