// The drain's bound: what cannot finish by itself — a client that does not read its answer, a
// request that never arrives in full — is destroyed once the grace period and the flush margin
// are over, the drain says so in its log line, and close() still completes.
import t, { type Test } from 'tap'
import { connect, type Socket } from 'node:net'
import { once } from 'node:events'
import { Agent, request } from 'undici'
import { startBurrow } from '../helpers/harness.js'

const GRACE = 300
/** The flush margin of src/app/burrow.ts. */
const MARGIN = 2_000

function rawClient(url: string, t: Test): Promise<Socket> {
  const { hostname, port } = new URL(url)
  const socket = connect(Number(port), hostname)
  t.teardown(() => {
    socket.destroy()
  })
  return once(socket, 'connect').then(() => socket)
}

async function closeTimed(h: Awaited<ReturnType<typeof startBurrow>>): Promise<{ ms: number; drained: any }> {
  const t0 = performance.now()
  await h.close()
  return { ms: performance.now() - t0, drained: h.logs.find((l) => l.msg === 'http drained') }
}

t.test('a slow client gets the whole of an answer that was written but not yet flushed when the drain began', async (t) => {
  const h = await startBurrow({ BURROW_SHUTDOWN_GRACE_MS: String(GRACE) }, { fake: true })
  const id = await h.api.createSession({ model: 'openai:gpt-4o-mini' })
  const answer = 'y'.repeat(16_000_000)
  h.fake.enqueue({ text: answer, chunkSize: 8_000_000 })
  const agent = new Agent()
  t.teardown(() => agent.destroy())
  const res = await request(`${h.url}/v1/sessions/${id}/turns`, {
    method: 'POST',
    dispatcher: agent,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input: 'long' }),
  })
  // The server has ended the response; most of it waits in its buffers until the client reads.
  const closed = closeTimed(h)
  await new Promise((r) => setTimeout(r, 500))
  const body = (await res.body.json()) as { output_text?: string }
  t.ok(body.output_text === answer, `the whole answer arrived (${body.output_text?.length ?? 0} of ${answer.length} chars)`)
  const { ms, drained } = await closed
  t.match(drained, { level: 30, in_flight: 1, forced: false, cut: 0 })
  t.ok(ms < GRACE + MARGIN, `close ended once the answer was flushed (${ms.toFixed(0)} ms)`)
})

t.test('a client that does not read its answer is cut at the deadline', async (t) => {
  const h = await startBurrow({ BURROW_SHUTDOWN_GRACE_MS: String(GRACE) }, { fake: true })
  const id = await h.api.createSession({ model: 'openai:gpt-4o-mini' })
  // Far more than the kernel buffers hold: most of it stays in the server until the client reads.
  h.fake.enqueue({ text: 'x'.repeat(16_000_000), chunkSize: 8_000_000 })
  const agent = new Agent()
  t.teardown(() => agent.destroy())
  const res = await request(`${h.url}/v1/sessions/${id}/turns`, {
    method: 'POST',
    dispatcher: agent,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input: 'long' }),
  })
  t.equal(res.statusCode, 200, 'the answer started')
  const { ms, drained } = await closeTimed(h)
  const body = res.body.text().then(
    () => 'complete',
    () => 'cut',
  )
  t.ok(ms >= GRACE + MARGIN - 100, `close waited for the grace period and the margin (${ms.toFixed(0)} ms)`)
  t.ok(ms < GRACE + MARGIN + 2_000, 'and not much longer')
  t.match(drained, { level: 40, in_flight: 1, forced: true, cut: 1 }, 'the drain reports the cut answer as a warning')
  t.equal(await body, 'cut', 'the client sees the answer cut, not a short answer passed off as whole')
})

t.test('a request whose body never arrives does not hold the close', async (t) => {
  const h = await startBurrow({ BURROW_SHUTDOWN_GRACE_MS: String(GRACE) })
  const socket = await rawClient(h.url, t)
  const ended = once(socket, 'close')
  socket.write('POST /v1/sessions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{')
  await new Promise((r) => setTimeout(r, 100))
  const { ms, drained } = await closeTimed(h)
  t.ok(ms < GRACE + MARGIN + 2_000, `close completed (${ms.toFixed(0)} ms)`)
  t.match(drained, { forced: true, in_flight: 1, cut: 1 })
  await ended
})

t.test('a connection that sent half a request line does not hold the close', async (t) => {
  const h = await startBurrow({ BURROW_SHUTDOWN_GRACE_MS: String(GRACE) })
  const socket = await rawClient(h.url, t)
  const ended = once(socket, 'close')
  socket.write('GET /healthz HT')
  await new Promise((r) => setTimeout(r, 100))
  const { ms, drained } = await closeTimed(h)
  t.ok(ms < GRACE + MARGIN + 2_000, `close completed (${ms.toFixed(0)} ms)`)
  t.match(drained, { forced: true, in_flight: 0, cut: 0 }, 'no request was in flight, yet the connection was open')
  await ended
})

t.test('with nothing in flight and idle kept-alive sockets, close does not wait', async (t) => {
  const h = await startBurrow({ BURROW_SHUTDOWN_GRACE_MS: '10000' })
  const agent = new Agent({ keepAliveTimeout: 60_000, keepAliveMaxTimeout: 60_000 })
  t.teardown(() => agent.destroy())
  for (let i = 0; i < 4; i++) {
    const r = await request(`${h.url}/healthz`, { dispatcher: agent })
    t.equal(r.headers.connection, 'keep-alive')
    await r.body.dump()
  }
  const { ms, drained } = await closeTimed(h)
  t.ok(ms < 1_000, `close took ${ms.toFixed(0)} ms`)
  t.match(drained, { level: 30, forced: false, in_flight: 0, cut: 0 })
})
