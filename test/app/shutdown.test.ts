// SIGTERM on the real server process: running turns finish within the grace period or are
// interrupted with a valid history, streams are closed with a reason, and the process exits 0.
import t from 'tap'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Api } from '../helpers/harness.js'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { spawnServer } from '../helpers/child-server.js'

async function startServer(env: Record<string, string>) {
  const dataDir = await mkdtemp(join(tmpdir(), 'burrow-shutdown-'))
  const server = await spawnServer({ BURROW_DATA_DIR: dataDir, ...env })
  server.child.once('exit', () => {
    void rm(dataDir, { recursive: true, force: true })
  })
  return server
}

t.test('SIGTERM lets a running turn finish within the grace period', async (t) => {
  const fake = await startFakeLlm({ openaiKey: 'k' })
  t.teardown(() => fake.close())
  const { child, url, lines } = await startServer({
    OPENAI_API_KEY: 'k',
    OPENAI_BASE_URL: `${fake.url}/v1`,
    BURROW_SHUTDOWN_GRACE_MS: '5000',
  })
  const api = new Api(url)
  const id = await api.createSession({ model: 'openai:gpt-4o-mini' })
  const stream = await api.sse(`/v1/sessions/${id}/events`)
  fake.enqueue({ text: 'finishing my thought calmly', chunkSize: 3, delayMs: 40 })
  const turn = api.turn(id, { input: 'take your time' })
  await stream.until((f) => f.event === 'turn_started')
  const exited = once(child, 'exit')
  child.kill('SIGTERM')
  const closed = await stream.until((f) => f.event === 'stream_closed')
  t.same(closed.at(-1)!.data.data, { reason: 'shutdown' })
  const refused = await api.post('/v1/sessions', {})
  t.equal(refused.status, 503, 'no new work while draining')
  t.equal(refused.body.code, 'SHUTTING_DOWN')
  const ready = await api.get('/readyz')
  t.equal(ready.status, 503)
  t.same(ready.body, { status: 'shutting_down' })
  const r = await turn
  t.equal(r.status, 200, 'the running turn completed')
  t.equal(r.body.output_text, 'finishing my thought calmly')
  const [code] = await exited
  t.equal(code, 0)
  t.ok(lines.some((l) => l.msg === 'shutting down' && l.signal === 'SIGTERM'))
})

t.test('SIGTERM interrupts a turn that outlives the grace period', async (t) => {
  const fake = await startFakeLlm({ openaiKey: 'k' })
  t.teardown(() => fake.close())
  const { child, url } = await startServer({ OPENAI_API_KEY: 'k', OPENAI_BASE_URL: `${fake.url}/v1`, BURROW_SHUTDOWN_GRACE_MS: '300' })
  const api = new Api(url)
  const id = await api.createSession({ model: 'openai:gpt-4o-mini' })
  fake.enqueue({ text: 'never ends', hang: 'body' })
  const turn = api.sse(`/v1/sessions/${id}/turns`, { method: 'POST', body: { input: 'hang' } })
  const s = await turn
  await s.until((f) => f.event === 'turn_started')
  const exited = once(child, 'exit')
  const t0 = Date.now()
  child.kill('SIGTERM')
  const end = await s.until((f) => f.event === 'turn_failed')
  t.same(end.at(-1)!.data.data.code, 'INTERRUPTED')
  t.equal(end.at(-1)!.data.data.reason, 'shutdown')
  const [code] = await exited
  t.equal(code, 0)
  t.ok(Date.now() - t0 < 5000, 'did not wait for the provider')
})
