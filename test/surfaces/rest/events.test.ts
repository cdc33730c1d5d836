import t from 'tap'
import net from 'node:net'
import { EventSource } from 'eventsource'
import { MODES, startBurrow, eventually, sleep } from '../../helpers/harness.js'

for (const mode of MODES)
  t.test(`${mode.name}: session event streams: tail, replay, seams`, async (t) => {
    const h = await startBurrow({ ...mode.env, BURROW_SSE_HEARTBEAT_MS: '40' }, { fake: true })
    t.teardown(() => h.close())
    const { api } = h

    t.test('a subscriber sees every stored event of the session in seq order', async (t) => {
      const id = await api.createSession()
      const s = await api.sse(`/v1/sessions/${id}/events`)
      t.equal(s.status, 200)
      t.equal(s.headers['content-type'], 'text/event-stream')
      await api.turn(id, { input: 'one' })
      await api.turn(id, { input: 'two' })
      const frames = await s.until((f) => f.event === 'turn_completed' && f.data.turn === 2)
      const stored = frames.filter((f) => f.event !== 'text_delta')
      t.same(
        stored.map((f) => f.data.seq),
        [2, 3, 4, 5, 6, 7],
      )
      t.same(
        stored.map((f) => f.event),
        ['turn_started', 'assistant_message', 'turn_completed', 'turn_started', 'assistant_message', 'turn_completed'],
      )
      t.ok(
        frames.some((f) => f.event === 'text_delta'),
        'live deltas are delivered too',
      )
      await sleep(100)
      t.ok(
        s.comments.some((c) => c.trim() === 'heartbeat'),
        'heartbeat comments keep the stream alive',
      )
      s.close()
    })

    t.test('Last-Event-ID and ?after= replay from the buffer, then tail', async (t) => {
      const id = await api.createSession()
      await api.turn(id, { input: 'one' })
      await api.turn(id, { input: 'two' })
      const byHeader = await api.sse(`/v1/sessions/${id}/events`, { headers: { 'last-event-id': '3' } })
      const byQuery = await api.sse(`/v1/sessions/${id}/events?after=3`)
      const all = await api.sse(`/v1/sessions/${id}/events?after=0`)
      await api.turn(id, { input: 'three' })
      for (const s of [byHeader, byQuery]) {
        const frames = (await s.until((f) => f.data.seq === 10 && f.event === 'turn_completed')).filter((f) => f.id)
        t.same(
          frames.map((f) => Number(f.id)),
          [4, 5, 6, 7, 8, 9, 10],
          'from seq 4, gapless, no duplicate at the seam',
        )
        s.close()
      }
      const frames = (await all.until((f) => f.data.seq === 10)).filter((f) => f.id)
      t.same(
        frames.map((f) => f.data.seq),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
      )
      t.equal(frames[0]!.event, 'session_created')
      all.close()
      const bad = await api.sse(`/v1/sessions/${id}/events`, { headers: { 'last-event-id': 'abc' } })
      t.equal(bad.status, 400)
      t.equal(bad.problem.code, 'INVALID_REQUEST')
      const unknown = await api.sse('/v1/sessions/01900000-0000-7000-8000-000000000000/events')
      t.equal(unknown.status, 404)
      t.equal(unknown.problem.code, 'SESSION_NOT_FOUND')
    })

    t.test('a replay that starts while a turn is running has no gap and no duplicate', async (t) => {
      const id = await api.createSession({ model: 'openai:gpt-4o-mini' })
      await api.turn(id, { input: 'warm up' })
      h.fake.enqueue({ text: 'a b c d e f g h i j k l m n o p', chunkSize: 2, delayMs: 15 })
      const running = api.turn(id, { input: 'long one' })
      await eventually(() => h.fake.requests.some((r) => JSON.stringify(r.body).includes('long one')))
      const s = await api.sse(`/v1/sessions/${id}/events?after=1`)
      await running
      const frames = (await s.until((f) => f.event === 'turn_completed' && f.data.turn === 2)).filter((f) => f.id)
      t.same(
        frames.map((f) => f.data.seq),
        [2, 3, 4, 5, 6, 7],
      )
      s.close()
    })

    t.test(`tenant stream: every session${mode.persistent ? '' : ', live only'}`, async (t) => {
      const s = await api.sse('/v1/events')
      const a = await api.createSession()
      const b = await api.createSession()
      await api.turn(a, { input: 'to a' })
      await api.turn(b, { input: 'to b' })
      const frames = await s.until((f) => f.event === 'turn_completed' && f.data.session_id === b)
      const ids = new Set(frames.map((f) => f.data.session_id))
      t.ok(ids.has(a) && ids.has(b), 'both sessions')
      t.same(
        frames.filter((f) => f.data.session_id === a && f.id).map((f) => f.event),
        ['session_created', 'turn_started', 'assistant_message', 'turn_completed'],
      )
      s.close()
      // With a store the tenant stream resumes (tenant-stream.test.ts); without one it says it cannot.
      if (mode.persistent) return
      const resumed = await api.sse('/v1/events', { headers: { 'last-event-id': '5' } })
      const first = await resumed.next()
      t.equal(first!.event, 'stream_truncated', 'a resume on the live-only stream says so instead of a silent gap')
      t.equal(first!.data.data.reason, 'live_only')
      t.equal(first!.id, undefined)
      resumed.close()
    })
  })

t.test('lmdb: a replay beyond the in-memory buffer comes from the log, whole', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb', BURROW_EVENT_BUFFER: '4' })
  t.teardown(() => h.close())
  const id = await h.api.createSession()
  for (let i = 0; i < 3; i++) await h.api.turn(id, { input: `turn ${i}` })
  const s = await h.api.sse(`/v1/sessions/${id}/events?after=2`)
  await h.api.turn(id, { input: 'live' })
  const frames = await s.until((f) => f.data.seq === 13)
  t.notOk(
    frames.some((f) => f.event === 'stream_truncated'),
    'no truncation with a store',
  )
  t.same(
    frames.filter((f) => f.id).map((f) => f.data.seq),
    [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13],
  )
  s.close()
})

t.test('ephemeral: a replay beyond the buffer starts with stream_truncated', async (t) => {
  const h = await startBurrow({ BURROW_EVENT_BUFFER: '4' })
  t.teardown(() => h.close())
  const id = await h.api.createSession()
  for (let i = 0; i < 3; i++) await h.api.turn(id, { input: `turn ${i}` })
  // 10 stored events; the buffer holds the last 4 (7..10).
  const s = await h.api.sse(`/v1/sessions/${id}/events?after=2`)
  const first = await s.next()
  t.equal(first!.event, 'stream_truncated')
  t.same(first!.data.data, { requested_after: 2, first_seq: 7, reason: 'events_unavailable' })
  await h.api.turn(id, { input: 'live' })
  const rest = (await s.until((f) => f.data.seq === 13)).filter((f) => f.id)
  t.same(
    rest.map((f) => f.data.seq),
    [7, 8, 9, 10, 11, 12, 13],
  )
  s.close()
  const fine = await h.api.sse(`/v1/sessions/${id}/events?after=10`)
  const f = await fine.next()
  t.equal(f!.data.seq, 11, 'no truncation when the buffer covers the request')
  fine.close()
})

for (const mode of MODES)
  t.test(`${mode.name}: the eventsource client reconnects with Last-Event-ID and misses nothing`, async (t) => {
    const h = await startBurrow(mode.env)
    t.teardown(() => h.close())
    const target = new URL(h.url)
    const upstream: net.Socket[] = []
    const requests: string[] = []
    const proxy = net.createServer((client) => {
      const server = net.connect(Number(target.port), target.hostname)
      upstream.push(client)
      client.once('data', (d) => requests.push(d.toString()))
      client.pipe(server).pipe(client)
      client.on('error', () => server.destroy())
      server.on('error', () => client.destroy())
    })
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r))
    t.teardown(() => new Promise<void>((r) => proxy.close(() => r())))
    const port = (proxy.address() as net.AddressInfo).port
    const id = await h.api.createSession()

    const seen: number[] = []
    const es = new EventSource(`http://127.0.0.1:${port}/v1/sessions/${id}/events?after=0`)
    t.teardown(() => es.close())
    for (const type of ['session_created', 'turn_started', 'assistant_message', 'turn_completed']) {
      es.addEventListener(type, (e) => seen.push(Number((e as MessageEvent).lastEventId)))
    }
    await h.api.turn(id, { input: 'before the cut' })
    await eventually(() => seen.length === 4)
    for (const s of upstream.splice(0)) s.destroy()
    await h.api.turn(id, { input: 'while disconnected' })
    await h.api.turn(id, { input: 'after' })
    await eventually(() => seen.length === 10, 8000)
    t.same(seen, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 'every event once, in order, across the reconnect')
    const second = requests.find((r, i) => i > 0 && /last-event-id: 4/i.test(r))
    t.ok(second, 'the reconnect sent Last-Event-ID: 4')
  })

for (const mode of MODES)
  t.test(`${mode.name}: a reader that stops reading is dropped without slowing the turn`, async (t) => {
    const h = await startBurrow({ ...mode.env, BURROW_SSE_QUEUE_LIMIT: '8', BURROW_DURABILITY: 'relaxed' })
    t.teardown(() => h.close())
    const id = await h.api.createSession()
    const target = new URL(h.url)
    const sock = net.connect(Number(target.port), target.hostname)
    await new Promise<void>((r) => sock.once('connect', () => r()))
    sock.write(`GET /v1/sessions/${id}/events HTTP/1.1\r\nhost: x\r\naccept: text/event-stream\r\n\r\n`)
    sock.pause() // never read: the kernel buffers fill, then the server's queue
    let closed = false
    sock.on('close', () => {
      closed = true
    })
    await eventually(async () => (await h.api.get('/metrics')).body.includes('burrow_sse_streams_active 1'))
    const big = 'x'.repeat(200_000)
    const t0 = Date.now()
    for (let i = 0; i < 40; i++) {
      const r = await h.api.turn(id, { input: big })
      t.equal(r.status, 200)
    }
    t.ok(Date.now() - t0 < 20_000, 'turns were not held up by the stalled reader')
    // The server dropped the reader: its stream count falls back to zero...
    await eventually(async () => (await h.api.get('/metrics')).body.includes('burrow_sse_streams_active 0'), 10_000)
    // ...and the client, once it reads again, finds the connection closed.
    sock.resume()
    await eventually(() => closed, 10_000)
    t.ok(closed, 'the stalled connection was closed')
  })

for (const mode of MODES)
  t.test(`${mode.name}: the event log as JSON pages`, async (t) => {
    const h = await startBurrow({ ...mode.env, BURROW_EVENT_BUFFER: '5' })
    t.teardown(() => h.close())
    const id = await h.api.createSession()
    for (let i = 0; i < 3; i++) await h.api.turn(id, { input: `turn ${i}` })
    const p1 = await h.api.get(`/v1/sessions/${id}/event-log?after=0&limit=4`)
    if (mode.persistent) {
      t.same(
        p1.body.events.map((e: any) => e.seq),
        [1, 2, 3, 4],
      )
      t.equal(p1.body.truncated, false)
      const p2 = await h.api.get(`/v1/sessions/${id}/event-log?after=4&limit=100`)
      t.same(
        p2.body.events.map((e: any) => e.seq),
        [5, 6, 7, 8, 9, 10],
      )
    } else {
      t.equal(p1.body.truncated, true, 'the ephemeral buffer no longer reaches back to seq 1')
      t.same(
        p1.body.events.map((e: any) => e.seq),
        [6, 7, 8, 9],
      )
    }
    t.equal(p1.body.last_seq, 10)
    t.equal((await h.api.get(`/v1/sessions/${id}/event-log?after=10`)).body.events.length, 0)
  })
