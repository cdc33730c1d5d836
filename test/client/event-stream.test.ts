// The client's event streams: reconnection with Last-Event-ID through a proxy that cuts connections.
import t from 'tap'
import net from 'node:net'
import { BurrowClient, type ReconnectInfo, type StreamItem } from '../../src/client/index.js'
import { MODES, eventually, sleep, startBurrow } from '../helpers/harness.js'
import { closeHarness } from './close.js'

/** A TCP proxy to `target` that records what clients send and can cut every connection. */
async function startProxy(target: string) {
  const { hostname, port } = new URL(target)
  const sockets: net.Socket[] = []
  const sent: string[] = []
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname)
    sockets.push(client, upstream)
    client.on('data', (d) => sent.push(d.toString()))
    client.pipe(upstream).pipe(client)
    client.on('error', () => upstream.destroy())
    upstream.on('error', () => client.destroy())
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    sent,
    cut() {
      for (const s of sockets.splice(0)) s.destroy()
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy()
        server.close(() => r())
      }),
  }
}

/** Iterates in the background, keeping every item, until the iterator ends or fails. */
function collect(it: AsyncIterable<StreamItem>) {
  const items: StreamItem[] = []
  let error: unknown
  const done = (async () => {
    try {
      for await (const f of it) items.push(f)
    } catch (err) {
      error = err
    }
  })()
  const seqs = () => items.flatMap((f) => (f.kind === 'event' && f.event.type !== 'text_delta' ? [f.event.seq] : []))
  return { items, seqs, done, error: () => error }
}

const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i)

for (const mode of MODES)
  t.test(`${mode.name}: events() reconnects with Last-Event-ID and yields each seq once`, async (t) => {
    const h = await startBurrow(mode.env)
    t.teardown(() => closeHarness(h))
    const proxy = await startProxy(h.url)
    t.teardown(() => proxy.close())
    const direct = new BurrowClient({ baseUrl: h.url })
    const viaProxy = new BurrowClient({ baseUrl: proxy.url })
    const id = (await direct.createSession({})).session_id

    const abort = new AbortController()
    const reconnects: ReconnectInfo[] = []
    const stream = collect(viaProxy.events(id, { after: 0, signal: abort.signal, onReconnect: (i) => reconnects.push(i) }))
    await direct.startTurn(id, { input: 'before the cut' })
    await eventually(() => stream.seqs().length === 4)

    proxy.cut()
    await direct.startTurn(id, { input: 'while disconnected' })
    await direct.startTurn(id, { input: 'still disconnected' })
    await eventually(() => stream.seqs().length === 10, 8000)

    // A cut while turns keep coming.
    const turns = (async () => {
      for (let i = 0; i < 4; i++) {
        await direct.startTurn(id, { input: `busy ${i}` })
        await sleep(100)
      }
    })()
    await sleep(150)
    proxy.cut()
    await turns
    await eventually(() => stream.seqs().length === 22, 8000)

    t.same(stream.seqs(), range(1, 22), 'every stored seq once, in order')
    t.ok(reconnects.length >= 2, 'it reconnected')
    t.same(reconnects[0], { ...reconnects[0], attempt: 1, lastEventId: 4, delayMs: 1000 }, "after the server's retry delay")
    t.ok(
      proxy.sent.some((r) => /^last-event-id: 4\r$/im.test(r)),
      'the reconnect sent Last-Event-ID: 4',
    )
    t.ok(proxy.sent.every((r) => !r.startsWith('GET') || /^accept: text\/event-stream\r$/im.test(r)))

    abort.abort()
    await stream.done
    t.equal(stream.error(), undefined, 'aborting ends the iteration quietly')
  })

t.test('breaking out of the loop closes the stream; a deleted session ends it', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb', BURROW_DURABILITY: 'relaxed' })
  t.teardown(() => closeHarness(h))
  const client = new BurrowClient({ baseUrl: h.url })
  const id = (await client.createSession({})).session_id
  await client.startTurn(id, { input: 'one' })

  const types: string[] = []
  for await (const f of client.events(id, { after: 0 })) {
    if (f.kind === 'event') types.push(f.event.type)
    if (types.length === 2) break
  }
  t.same(types, ['session_created', 'turn_started'])
  await eventually(async () => (await (await fetch(`${h.url}/metrics`)).text()).includes('burrow_sse_streams_active 0'))

  const stream = collect(client.events(id, { after: 4 }))
  await client.startTurn(id, { input: 'two' })
  await eventually(() => stream.seqs().length === 3)
  await client.delete(id)
  await stream.done
  t.equal(stream.error(), undefined)
  t.same(stream.seqs(), [5, 6, 7])
  t.match(stream.items.at(-1), { kind: 'control', control: { type: 'stream_closed', data: { reason: 'session_deleted' } } })
})

t.test('the tenant stream tails every session, text deltas included', async (t) => {
  const h = await startBurrow({}, { fake: true })
  t.teardown(() => closeHarness(h))
  const client = new BurrowClient({ baseUrl: h.url })
  const a = (await client.createSession({ model: 'openai:gpt-4o-mini' })).session_id
  const b = (await client.createSession({})).session_id
  const abort = new AbortController()
  const stream = collect(client.events(null, { signal: abort.signal }))
  await eventually(async () => (await (await fetch(`${h.url}/metrics`)).text()).includes('burrow_sse_streams_active 1'))
  h.fake.enqueue({ api: 'openai', text: 'streamed in pieces', chunkSize: 3 })
  await client.startTurn(a, { input: 'hi' })
  await client.startTurn(b, { input: 'hi' })
  await eventually(() => stream.items.filter((f) => f.kind === 'event' && f.event.type === 'turn_completed').length === 2)
  const sessions = new Set(stream.items.map((f) => (f.kind === 'event' ? f.event.session_id : null)))
  t.same([...sessions].sort(), [a, b].sort())
  t.ok(stream.items.some((f) => f.kind === 'event' && f.event.type === 'text_delta'))
  abort.abort()
  await stream.done
})

t.test('a streamed turn whose connection breaks: the idempotency key recovers its result', async (t) => {
  const h = await startBurrow({}, { fake: true })
  t.teardown(() => closeHarness(h))
  const proxy = await startProxy(h.url)
  t.teardown(() => proxy.close())
  const client = new BurrowClient({ baseUrl: proxy.url })
  const id = (await client.createSession({ model: 'openai:gpt-4o-mini' })).session_id
  const slow = { api: 'openai' as const, text: 'slowly but surely', chunkSize: 2, delayMs: 30 }
  const cutOnFirstDelta = (types: string[]) => (e: { type: string }) => {
    types.push(e.type)
    if (e.type === 'text_delta' && types.filter((x) => x === 'text_delta').length === 1) proxy.cut()
  }

  h.fake.enqueue(slow)
  const types: string[] = []
  const r = await client.startTurn(id, { input: 'go' }, { idempotencyKey: 'cut-1', onEvent: cutOnFirstDelta(types) })
  t.ok(!types.includes('turn_completed'), 'the stream broke before the turn ended')
  t.match(r, { turn: 1, status: 'completed', output_text: 'slowly but surely' })
  t.same(r, await client.startTurn(id, { input: 'go' }, { idempotencyKey: 'cut-1' }))

  h.fake.enqueue(slow)
  const lost = await client.startTurn(id, { input: 'again' }, { onEvent: cutOnFirstDelta([]) }).then(
    () => null,
    (e: unknown) => e,
  )
  t.match(lost, { name: 'BurrowError', code: 'INTERNAL', data: { transport: 'network' } }, 'without a key the outcome is unknown')
})

t.test('lmdb: the tenant stream resumes with Last-Event-ID after a cut, every event once', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb', BURROW_DURABILITY: 'relaxed' })
  t.teardown(() => closeHarness(h))
  const proxy = await startProxy(h.url)
  t.teardown(() => proxy.close())
  const direct = new BurrowClient({ baseUrl: h.url })
  const viaProxy = new BurrowClient({ baseUrl: proxy.url })
  const a = (await direct.createSession({})).session_id
  const b = (await direct.createSession({})).session_id
  const abort = new AbortController()
  const reconnects: ReconnectInfo[] = []
  const stream = collect(viaProxy.events(null, { after: 0, signal: abort.signal, onReconnect: (i) => reconnects.push(i) }))
  const stored = () => stream.items.filter((f) => f.kind === 'event' && f.event.type !== 'text_delta')
  await eventually(() => stored().length === 2)
  proxy.cut()
  await direct.startTurn(a, { input: 'while disconnected' })
  await direct.startTurn(b, { input: 'also while disconnected' })
  await eventually(() => stored().length === 8, 8000)
  await direct.startTurn(a, { input: 'live again' })
  await eventually(() => stored().length === 11, 8000)
  abort.abort()
  await stream.done
  t.ok(reconnects.length >= 1 && reconnects[0]!.lastEventId !== undefined, 'it reconnected with the last stream id')
  const keys = stored().map((f) => (f.kind === 'event' ? `${f.event.session_id}:${f.event.seq}` : ''))
  t.equal(new Set(keys).size, keys.length, 'no duplicate')
  t.same(
    keys.filter((k) => k.startsWith(a)).map((k) => Number(k.split(':')[1])),
    range(1, 7),
    "a's events, in order, none missing",
  )
  t.same(
    keys.filter((k) => k.startsWith(b)).map((k) => Number(k.split(':')[1])),
    range(1, 4),
  )
  const ids = stored().map((f) => (f.kind === 'event' ? f.id : undefined))
  t.ok(
    ids.every((id, i) => typeof id === 'number' && (i === 0 || id > ids[i - 1]!)),
    'stream ids increase',
  )
})
