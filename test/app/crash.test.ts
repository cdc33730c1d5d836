// kill -9 at random points under concurrent turns, many times: every acknowledged turn
// survives, seqs stay gapless, a turn that was in flight is closed with
// `process_restarted`, and the history is always one a provider accepts. On LMDB and on
// PostgreSQL (a database of its own).
import t, { type Test } from 'tap'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { checkHistory } from '../../src/core/messages.js'
import { Api, sleep } from '../helpers/harness.js'
import { spawnServer } from '../helpers/child-server.js'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { tempDatabase } from '../helpers/pg.js'
import { rounds } from '../helpers/thoroughness.js'

// kill -9 rounds on LMDB (half as many on PostgreSQL): 3 in npm test, 8 in npm run test:full.
const ITERATIONS = rounds(3, 8, process.env.CRASH_ITERATIONS)
const SESSIONS = 4

// A round (on each store) is a server start, a check of every session and up to a second of load:
// seconds each on a busy two-core machine, and more than the suite's default with the full count.
t.setTimeout(120_000 + ITERATIONS * 30_000)

interface Ack {
  turn: number
  first_seq: number
  last_seq: number
  status: string
}

t.test('kill -9 under concurrent turns (LMDB)', async (t) => crashRun(t, { BURROW_SESSION_STORE: 'lmdb' }, ITERATIONS))

t.test('kill -9 under concurrent turns (PostgreSQL)', async (t) => {
  const db = await tempDatabase(t, 'crash')
  // Restarted under the same replica id, as a supervisor restarts a replica: the new process ends the
  // dead one's leases at start-up and recovers its turns at once, not a lease later.
  await crashRun(
    t,
    { BURROW_SESSION_STORE: 'postgres', BURROW_DATABASE_URL: db.url, BURROW_PG_POOL_SIZE: '4', BURROW_REPLICA_ID: 'crash-replica' },
    Math.ceil(ITERATIONS / 2),
  )
})

async function crashRun(t: Test, store: Record<string, string>, ITERATIONS: number): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'burrow-crash-'))
  const fake = await startFakeLlm({ openaiKey: 'k' })
  t.teardown(async () => {
    await fake.close()
    await rm(dataDir, { recursive: true, force: true })
  })
  const env = {
    ...store,
    BURROW_DATA_DIR: dataDir,
    OPENAI_API_KEY: 'k',
    OPENAI_BASE_URL: `${fake.url}/v1`,
    BURROW_PROVIDER_RETRY_BASE_MS: '1',
    LOG_LEVEL: 'info',
  }
  const tools = [{ name: 'lookup', input_schema: { type: 'object' } }]
  const acks = new Map<string, Ack[]>()
  const ackCount = () => [...acks.values()].reduce((n, a) => n + a.length, 0)
  let ids: string[] = []
  let seed = 7
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31

  for (let it = 0; it <= ITERATIONS; it++) {
    const server = await spawnServer(env)
    const api = new Api(server.url)
    if (it === 0) {
      for (let i = 0; i < SESSIONS; i++) ids.push(await api.createSession({ model: 'openai:gpt-4o-mini', tools }))
      ids.forEach((id) => acks.set(id, []))
    }

    // Check what the previous process left, after this one recovered it.
    for (const id of ids) {
      const view = (await api.get(`/v1/sessions/${id}`)).body
      const s = await api.sse(`/v1/sessions/${id}/events?after=0`)
      const events = (await s.until((f) => f.data.seq === view.last_seq, 10_000)).filter((f) => f.id).map((f) => f.data)
      s.close()
      t.ok(
        events.every((e, i) => e.seq === i + 1),
        `iteration ${it}: ${id.slice(-4)} seqs gapless 1..${view.last_seq}`,
      )
      t.equal(view.running, false)
      for (const a of acks.get(id)!) {
        const end = events.find((e) => e.seq === a.last_seq)
        const start = events.find((e) => e.seq === a.first_seq)
        t.ok(end && start && end.turn === a.turn, `acknowledged turn ${a.turn} (seq ${a.first_seq}..${a.last_seq}) is in the log`)
      }
      // Every turn that started has ended, or is paused waiting for the client.
      const started = new Set(events.filter((e) => e.type === 'turn_started' && !e.data.continuation).map((e) => e.turn))
      for (const turn of started) {
        const last = events.filter((e) => e.turn === turn).at(-1)!
        t.ok(['turn_completed', 'turn_failed', 'turn_requires_action'].includes(last.type), `turn ${turn} is closed (${last.type})`)
      }
      for (const f of events.filter((e) => e.type === 'turn_failed' && e.data.reason === 'process_restarted'))
        t.equal(f.data.code, 'INTERRUPTED')
      if (view.pending_tool_calls.length > 0) await api.post(`/v1/sessions/${id}/interrupt`)
      const after = (await api.get(`/v1/sessions/${id}`)).body
      t.equal(checkHistory(after.messages), null, 'the history is valid for a provider')
    }
    if (it === ITERATIONS) {
      const exit = once(server.child, 'exit')
      server.child.kill('SIGTERM')
      await exit
      break
    }

    // Load: every session runs turns back to back; some call tools; then kill -9 at a random moment.
    let stop = false
    const ackedBefore = ackCount()
    const workers = ids.map(async (id) => {
      while (!stop) {
        const r = rnd()
        if (r < 0.25) fake.enqueue({ toolCalls: [{ name: 'lookup', input: { r } }] })
        else if (r < 0.4) fake.enqueue({ toolCalls: [{ name: 'invented', input: {} }] }, { text: 'after the unknown tool', delayMs: 5 })
        else fake.enqueue({ text: `answer ${r.toFixed(3)} `.repeat(4), chunkSize: 6, delayMs: 3 })
        try {
          const res = await api.turn(id, { input: `load ${it}` })
          if (res.status === 200)
            acks.get(id)!.push({ turn: res.body.turn, first_seq: res.body.first_seq, last_seq: res.body.last_seq, status: res.body.status })
          if (res.status === 200 && res.body.status === 'requires_action') {
            const done = await api.turn(id, { tool_results: res.body.tool_calls.map((c: any) => ({ tool_call_id: c.id, content: 'ok' })) })
            if (done.status === 200)
              acks
                .get(id)!
                .push({ turn: done.body.turn, first_seq: done.body.first_seq, last_seq: done.body.last_seq, status: done.body.status })
          }
        } catch {
          return
        } // the connection died with the process
      }
    })
    await sleep(150 + rnd() * 500)
    // Not before a few turns were acknowledged in this round: on a slow machine the sleep alone may end before
    // the first one, and the round would test a start-up under load instead of acknowledged turns surviving.
    for (const t0 = Date.now(); ackCount() - ackedBefore < 3 && Date.now() - t0 < 30_000;) await sleep(10)
    const exit = once(server.child, 'exit')
    server.child.kill('SIGKILL')
    await exit
    stop = true
    await Promise.all(workers)
    // Steps the dead process never asked for must not leak into the next one.
    await drainScript(fake)
  }
  t.same(
    fake.requests.filter((r) => r.rejected).map((r) => r.rejected),
    [],
    'the provider never saw an invalid history',
  )
  t.ok(ackCount() > ITERATIONS * 2, 'turns were acknowledged in between the kills')
}

/** Consumes the scripted steps nobody will ask for any more. */
async function drainScript(fake: Awaited<ReturnType<typeof startFakeLlm>>) {
  while (fake.pending() > 0) {
    await fetch(`${fake.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer k', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'x', messages: [{ role: 'user', content: 'drain' }] }),
    })
      .then((r) => r.text())
      .catch(() => undefined)
  }
}
