// Three real server processes on one PostgreSQL database (each its own data directory): any replica
// serves any session, SSE on one replica streams the turns of another (text deltas included) and
// replays from the log with no gap and no duplicate, the tenant stream sees every replica's
// sessions, an interrupt sent to one replica stops the turn running on another, and a killed
// listener connection reconnects by itself with its subscribers caught up from the log. The busy
// policy holds across replicas: a queued turn waits for another replica's, an interrupting one replaces it.
import t from 'tap'
import { spawnServer, stopServer, type ChildServer } from '../helpers/child-server.js'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { Api, eventually, sleep } from '../helpers/harness.js'
import { adminQuery, tempDatabase } from '../helpers/pg.js'
import type { SseFrame } from '../helpers/sse-client.js'
import { tempDir } from '../helpers/temp-dir.js'

const fake = await startFakeLlm({ openaiKey: 'k' })
t.teardown(() => fake.close())
const db = await tempDatabase(t, 'replicas')

async function replica(name: string): Promise<{ server: ChildServer; api: Api }> {
  const server = await spawnServer({
    BURROW_SESSION_STORE: 'postgres',
    BURROW_DATABASE_URL: db.url,
    BURROW_PG_POOL_SIZE: '4',
    BURROW_MEMORY_STORE: 'off',
    BURROW_DATA_DIR: await tempDir(t, `replica-${name}`),
    BURROW_REPLICA_ID: `replica-${name}`,
    OPENAI_API_KEY: 'k',
    OPENAI_BASE_URL: `${fake.url}/v1`,
    LOG_LEVEL: 'info',
  })
  t.teardown(() => stopServer(server))
  return { server, api: new Api(server.url) }
}

// Started one after the other: each applies (or finds applied) the migrations under the lock.
const A = await replica('a')
const B = await replica('b')
const C = await replica('c')

const stored = (frames: SseFrame[]) => frames.filter((f) => f.id !== undefined && f.event !== 'text_delta')
const seqs = (frames: SseFrame[]) => stored(frames).map((f) => Number(f.id))
const deltaText = (frames: SseFrame[]) =>
  frames
    .filter((f) => f.event === 'text_delta')
    .map((f) => f.data.data.text)
    .join('')
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)
/** A long input, so the offline model's echo streams as many text deltas. */
const longInput = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(' ')

t.test('create on A, run on B, read on C', async (t) => {
  const id = await A.api.createSession({ metadata: { made: 'on a' } })
  const turn = await B.api.turn(id, { input: 'run on b' })
  t.equal(turn.status, 200)
  t.match(turn.body, { turn: 1, status: 'completed', output_text: /run on b/ })
  const view = await C.api.get(`/v1/sessions/${id}`)
  t.equal(view.status, 200)
  t.match(view.body, { turn_count: 1, last_seq: turn.body.last_seq, metadata: { made: 'on a' } })
  t.match(view.body.messages.at(-1), { role: 'assistant' })
})

t.test(
  'an SSE subscriber on A gets every event and text delta of turns on B, in order; Last-Event-ID on C resumes with no gap',
  async (t) => {
    const id = await A.api.createSession()
    const onA = await A.api.sse(`/v1/sessions/${id}/events`, { headers: { 'last-event-id': '1' } })
    const results = []
    for (let i = 0; i < 3; i++) {
      const r = await B.api.turn(id, { input: longInput(150 + i) })
      t.equal(r.status, 200)
      results.push(r.body)
    }
    const last = results.at(-1)!.last_seq
    const frames = await onA.until((f) => Number(f.id) === last && f.event === 'turn_completed', 10_000)
    onA.close()
    t.same(seqs(frames), range(2, last), 'every stored event, in order, once')
    const log = (await C.api.get(`/v1/sessions/${id}/event-log?after=1&limit=1000`)).body.events
    const got = stored(frames).map((f) => f.data)
    // Compared event by event: a diff of the whole lists is too slow to print.
    const differs = got.findIndex((e, i) => JSON.stringify(e) !== JSON.stringify(log[i]))
    t.same(differs === -1 ? null : [got[differs], log[differs]], null, 'the frames are the log')
    t.equal(got.length, log.length)
    for (const r of results) {
      const turnFrames = frames.filter((f) => f.data.turn === r.turn)
      t.equal(deltaText(turnFrames), r.output_text, `turn ${r.turn}: the text deltas add up to the answer`)
      // Each delta comes after its turn's start and before its end.
      const kinds = turnFrames.map((f) => f.event)
      t.ok(kinds.indexOf('turn_started') < kinds.indexOf('text_delta'), 'deltas after turn_started')
      t.ok(kinds.lastIndexOf('text_delta') < kinds.indexOf('turn_completed'), 'deltas before turn_completed')
    }

    // A turn on B with a subscriber joining C mid-way by Last-Event-ID: replay, then live, no gap, no duplicate.
    const mid = results[0]!.last_seq
    const running = B.api.turn(id, { input: longInput(400) })
    await sleep(5)
    const onC = await C.api.sse(`/v1/sessions/${id}/events`, { headers: { 'last-event-id': String(mid) } })
    const end = (await running).body
    const resumed = await onC.until((f) => Number(f.id) === end.last_seq && f.event === 'turn_completed', 10_000)
    onC.close()
    t.same(seqs(resumed), range(mid + 1, end.last_seq), 'resumed on C with no gap and no duplicate')
  },
)

t.test('the tenant stream on A sees a session created and run on B', async (t) => {
  const tenant = await A.api.sse('/v1/events')
  await sleep(50) // the subscription is registered once the response began
  const id = await B.api.createSession()
  const r = await B.api.turn(id, { input: longInput(40) })
  // Deltas come live and stored events from the journal: either may come first, so read until both are complete.
  let completed = false
  let text = ''
  const frames = await tenant.until((f) => {
    if (f.data?.session_id !== id) return false
    if (f.event === 'turn_completed') completed = true
    if (f.event === 'text_delta') text += f.data.data.text
    return completed && text.length >= r.body.output_text.length
  }, 10_000)
  tenant.close()
  const mine = frames.filter((f) => f.data?.session_id === id)
  t.same(
    stored(mine).map((f) => f.data.seq),
    range(1, r.body.last_seq),
    'session_created and every event of the turn, in order',
  )
  t.equal(mine[0]!.event, 'session_created')
  t.equal(deltaText(mine), r.body.output_text, 'text deltas too')
})

t.test('the tenant stream read on A resumes on C with no gap and no duplicate, turns running on every replica', async (t) => {
  const onA = await A.api.sse('/v1/events')
  await sleep(50)
  const ids = await Promise.all([A, B, C].map((r) => r.api.createSession()))
  // Turns on the three replicas at once: their commits interleave in the database.
  const runAll = () => Promise.all(ids.map((id, i) => [A, B, C][i]!.api.turn(id, { input: `turn on replica ${i}` })))
  await runAll()
  const firstPart = await onA.until((f) => f.data?.session_id === ids[2] && f.event === 'turn_completed', 10_000)
  onA.close()
  const lastId = firstPart.filter((f) => f.id !== undefined).at(-1)!.id!
  await runAll() // while nobody reads
  const onC = await C.api.sse('/v1/events', { headers: { 'last-event-id': lastId } })
  await runAll()
  const secondPart = await onC.until((f) => f.data?.session_id === ids[2] && f.event === 'turn_completed' && f.data.turn === 3, 10_000)
  onC.close()
  const read = [...firstPart, ...secondPart].filter((f) => f.id !== undefined && ids.includes(f.data.session_id))
  const streamIds = read.map((f) => Number(f.id))
  t.ok(
    streamIds.every((x, i) => i === 0 || x > streamIds[i - 1]!),
    'stream ids only grow, across the replicas',
  )
  for (const id of ids) {
    const last = (await B.api.get(`/v1/sessions/${id}`)).body.last_seq
    t.same(
      read.filter((f) => f.data.session_id === id).map((f) => f.data.seq),
      range(1, last),
      `session ${id}: every stored event once, in order`,
    )
  }
  t.notOk(
    secondPart.some((f) => f.event === 'stream_truncated'),
    'no truncation',
  )
})

t.test('an interrupt sent to A stops the turn running on B', async (t) => {
  const id = await A.api.createSession({ model: 'openai:gpt-4o-mini' })
  const idle = await A.api.post(`/v1/sessions/${id}/interrupt`)
  t.same(idle.body, { session_id: id, interrupted: false, turn: null }, 'nothing runs: as on one node')
  fake.enqueue({ text: 'never ends', hang: 'body' })
  const onB = await B.api.sse(`/v1/sessions/${id}/turns`, { method: 'POST', body: { input: 'hang' } })
  await onB.until((f) => f.event === 'turn_started', 5_000)
  const t0 = Date.now()
  const r = await A.api.post(`/v1/sessions/${id}/interrupt`)
  t.equal(r.status, 200)
  t.same(r.body, { session_id: id, interrupted: true, turn: 1 })
  t.ok(Date.now() - t0 < 3_000, 'answered once the turn ended, without waiting for a timeout')
  const end = await onB.until((f) => f.event === 'turn_failed', 5_000)
  t.equal(end.at(-1)!.data.data.code, 'INTERRUPTED')
  const view = (await C.api.get(`/v1/sessions/${id}`)).body
  t.equal(view.last_seq, Number(end.at(-1)!.id), 'the interrupted turn is in the log')
  fake.enqueue({ text: 'fine again' })
  t.match((await C.api.turn(id, { input: 'next' })).body, { status: 'completed', output_text: 'fine again' }, 'the session goes on')
})

t.test('the busy policy across replicas: queue on A waits for the turn on B; interrupt on C replaces it', async (t) => {
  const id = await A.api.createSession({ model: 'openai:gpt-4o-mini' })
  fake.enqueue({ text: 'slow on b', chunkSize: 3, delayMs: 100 }, { text: 'queued on a' })
  const onB = await B.api.sse(`/v1/sessions/${id}/turns`, { method: 'POST', body: { input: 'first' } })
  await onB.until((f) => f.event === 'turn_started', 5_000)
  const busy = await A.api.turn(id, { input: 'refused' })
  t.match(busy.body, { code: 'SESSION_BUSY', data: { reason: 'leased_elsewhere' } }, 'reject: as on one node')
  const onA = await A.api.sse(`/v1/sessions/${id}/turns`, { method: 'POST', body: { input: 'second', on_busy: 'queue' } })
  t.match(await onA.next(), { event: 'turn_queued', data: { data: { position: null } } }, 'queued behind another replica')
  const firstEnd = await onB.until((f) => f.event === 'turn_completed', 10_000)
  const secondEnd = await onA.until((f) => f.event === 'turn_completed', 10_000)
  t.equal(firstEnd.at(-1)!.data.turn, 1)
  t.match(secondEnd.at(-1)!.data, { turn: 2, data: { output_text: 'queued on a' } })

  fake.enqueue({ text: 'never ends', hang: 'body' }, { text: 'replaced on c' })
  const stalled = await B.api.sse(`/v1/sessions/${id}/turns`, { method: 'POST', body: { input: 'stalls' } })
  await stalled.until((f) => f.event === 'turn_started', 5_000)
  const replaced = await C.api.turn(id, { input: 'instead', on_busy: 'interrupt' })
  t.match(replaced.body, { status: 'completed', turn: 4, output_text: 'replaced on c' })
  const cut = await stalled.until((f) => f.event === 'turn_failed', 5_000)
  t.match(cut.at(-1)!.data, { turn: 3, data: { code: 'INTERRUPTED' } })
})

t.test('the listener connection killed: /readyz 503 while down, then it reconnects and subscribers catch up from the log', async (t) => {
  const id = await A.api.createSession()
  const onA = await A.api.sse(`/v1/sessions/${id}/events`, { headers: { 'last-event-id': '1' } })
  const tenantOnA = await A.api.sse('/v1/events')
  await sleep(50)
  const listener = await adminQuery(
    "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = 'burrow replica-a listener'",
    [db.name],
  )
  t.equal(listener.rows.length, 1, 'one listener connection')
  await adminQuery('SELECT pg_terminate_backend($1)', [listener.rows[0].pid])
  // A turn on B while A hears nothing (A waits 100 ms before reconnecting); /readyz on A says so.
  // Nothing is committed after it, so only the catch-up after the reconnection can bring its events.
  const [turn, notReady] = await Promise.all([
    B.api.turn(id, { input: 'during the outage' }),
    eventually(async () => {
      const r = await A.api.get('/readyz')
      return r.status === 503 && r.body
    }, 2_000),
  ])
  t.same(notReady, { status: 'store_unavailable' }, 'A is not ready while its listener is down')
  const last = turn.body.last_seq
  const frames = await onA.until((f) => Number(f.id) === last, 10_000)
  onA.close()
  t.same(seqs(frames), range(2, last), 'the subscriber on A caught up with no gap and no duplicate')
  const tenantFrames = await tenantOnA.until(
    (f) => f.data?.session_id === id && f.data?.seq === last && f.event === 'turn_completed',
    10_000,
  )
  tenantOnA.close()
  t.same(
    stored(tenantFrames.filter((f) => f.data?.session_id === id)).map((f) => f.data.seq),
    range(2, last),
    'the tenant stream on A caught up too',
  )
  const down = A.server.lines.find((l) => /listener connection to the database is down/.test(l.msg))
  const up = A.server.lines.find((l) => Date.parse(l.time) > Date.parse(down?.time) && /listening to the other replicas/.test(l.msg))
  t.ok(down && up, 'the outage and the reconnection are logged')
  t.ok(Date.parse(frames.at(-1)!.data.at) < Date.parse(up.time), 'the turn ended while the listener was down (so the catch-up brought it)')
  t.ok(await eventually(async () => (await A.api.get('/readyz')).status === 200, 5_000), 'ready again')
  const pids = await adminQuery("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = 'burrow replica-a listener'", [
    db.name,
  ])
  t.equal(pids.rows.length, 1, 'listening again on a new connection')
  t.not(pids.rows[0].pid, listener.rows[0].pid)
})

t.test('notifications carry commits and deltas within the payload limit', async (t) => {
  // A turn whose answer is one long word (no whitespace): its deltas arrive coalesced and cut.
  const id = await A.api.createSession()
  const onC = await C.api.sse(`/v1/sessions/${id}/events`, { headers: { 'last-event-id': '1' } })
  const big = 'x'.repeat(30_000) + 'é'.repeat(5_000)
  const r = await B.api.turn(id, { input: big })
  t.equal(r.status, 200)
  const frames = await onC.until((f) => f.event === 'turn_completed', 10_000)
  onC.close()
  t.equal(deltaText(frames), r.body.output_text, 'the whole text crossed')
})

t.test('no replica logged an error or crashed', async (t) => {
  for (const [name, r] of Object.entries({ A, B, C })) {
    t.equal(r.server.child.exitCode, null, `${name} runs`)
    t.same(
      r.server.lines.filter((l) => l.level >= 50 && !/listener connection/.test(l.msg)).map((l) => l.msg),
      [],
      `${name}: no error logged`,
    )
  }
})
