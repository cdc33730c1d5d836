// `on_busy: "queue"` on every surface that can tell its caller it waits (docs/api.md, "The busy
// policy"): a turn runs on the session (the real OpenAI client against the fake provider,
// slowed), a second request queues behind it through the surface, and the surface says so —
// SSE `turn_queued`, JSON-RPC `queued` notifications (in process and `burrow rpc`), MCP
// progress, the CLI's stderr line, the typed client's `onQueued` — then runs it as turn 2.
import t from 'tap'
import { BurrowClient } from '../../src/client/burrow-client.js'
import { eventually, startBurrow } from '../helpers/harness.js'
import { cliRpcSurface, cliSurface } from '../parity/cli-surface.js'
import { mcpSurface, restSurface, rpcStdioInProcess, type Surface } from '../parity/surfaces.js'

t.test('a queued turn says so on every surface that streams, then runs', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb', BURROW_PROVIDER_IDLE_TIMEOUT_MS: '20000' }, { fake: true })
  t.teardown(() => h.close())
  const { api, fake } = h
  const surfaces: Surface[] = [
    restSurface(h, 'sse'),
    rpcStdioInProcess(h),
    cliRpcSurface(h.url),
    await mcpSurface(h),
    cliSurface({ url: h.url }),
  ]
  t.teardown(() => Promise.all(surfaces.map((s) => s.close())))

  /** A session with a slow turn running on it (through REST); resolves once it runs, with the turn's promise. */
  const busySession = async (label: string) => {
    const id = await api.createSession({ model: 'openai:gpt-4o-mini' })
    fake.enqueue({ api: 'openai', text: 'slow answer', chunkSize: 4, delayMs: 150 }, { api: 'openai', text: `queued answer ${label}` })
    const first = api.turn(id, { input: 'first' })
    await eventually(async () => (await api.get(`/v1/sessions/${id}`)).body.running === true || undefined)
    return { id, first }
  }

  for (const s of surfaces) {
    await t.test(s.name, async (t) => {
      const { id, first } = await busySession(s.name)
      const r = await s.turn(id, 'second', s.name === 'cli' ? 'resume' : 'start', { on_busy: 'queue' })
      t.same(r.queued, [1], 'told it waits, first in line')
      t.ok(r.outcome.ok, JSON.stringify(r.outcome))
      if (r.outcome.ok) t.match(r.outcome.value, { turn: 2, output_text: `queued answer ${s.name}` })
      t.equal((await first).body.turn, 1, 'the running turn ended first')
    })
  }

  await t.test('typed client: onQueued', async (t) => {
    const { id, first } = await busySession('client')
    const client = new BurrowClient({ baseUrl: h.url })
    const told: Array<number | null> = []
    const result = await client.startTurn(id, { input: 'second', on_busy: 'queue' }, { onQueued: (p) => told.push(p) })
    t.same(told, [1])
    t.match(result, { turn: 2, output_text: 'queued answer client' })
    t.equal((await first).body.turn, 1)
  })

  await t.test('a request that does not wait is told nothing', async (t) => {
    const id = await api.createSession({ model: 'openai:gpt-4o-mini' })
    fake.enqueue({ api: 'openai', text: 'at once' })
    const r = await surfaces[0]!.turn(id, 'only', 'start', { on_busy: 'queue' })
    t.same(r.queued, [])
    t.match(r.outcome, { ok: true, value: { turn: 1 } })
  })
})
