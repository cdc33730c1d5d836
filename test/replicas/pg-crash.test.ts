// kill -9 of one of two replicas on one PostgreSQL database at random points, again and again,
// under clients that spread their turns over both; the killed one restarted under its own replica
// id, as a supervisor restarts it. After each round, through the other replica and the database:
// every acknowledged turn is in the log, seqs are gapless from 1, a cut-off turn is closed as crash
// recovery closes one, an SSE replay equals the stored log, the history is one a provider accepts,
// and every session takes its next turn (on either replica) within the lease and a few seconds.
import t from 'tap'
import { once } from 'node:events'
import { checkHistory, type Message } from '../../src/core/messages.js'
import { spawnServer, stopServer, type ChildServer } from '../helpers/child-server.js'
import { startFakeLlm, type FakeLlmServer } from '../helpers/fake-llm-server.js'
import { Api, sleep, type ApiResponse } from '../helpers/harness.js'
import { rounds } from '../helpers/thoroughness.js'
import { storedLog, storedRecord, twoReplicas } from './replicas.js'

// kill -9 rounds: 2 in npm test, 6 in npm run test:full.
const ITERATIONS = rounds(2, 6, process.env.CRASH_ITERATIONS)
const SEED = Number(process.env.CRASH_SEED ?? 16)
const SESSIONS = 6
const LEASE_MS = 2000
/** How long after the checks start every session must take a turn: the lease and a few seconds. */
const ACCEPT_WITHIN_MS = LEASE_MS + 4000

// Rounds of restarting servers on a busy two-core machine: its own bound, growing with the rounds.
t.setTimeout(120_000 + ITERATIONS * 40_000)

interface Ack {
  /** When the response came. */
  at: number
  turn: number
  first_seq: number
  last_seq: number
  status: string
  /** The input of a turn started with one (not a turn continued with tool results). */
  input?: string
}

/** A small seeded PRNG, so a failing round can be replayed with the same kill points (CRASH_SEED). */
function prng(seed: number): () => number {
  let s = seed
  return () => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31
}

t.test('kill -9 of either of two replicas at random points, restarted, many times', async (t) => {
  const fake = await startFakeLlm({ openaiKey: 'k' })
  t.teardown(() => fake.close())
  const { a, b, db, env } = await twoReplicas(t, { prefix: 'pgcrash', leaseMs: LEASE_MS, llmUrl: fake.url })
  const servers: ChildServer[] = [a, b]
  /** Every process that ran, with its replica id, for its logs. */
  const processes = [
    { name: 'replica-a', server: a },
    { name: 'replica-b', server: b },
  ]
  const envs = [env.a, env.b]
  const names = ['replica-a', 'replica-b']
  // The restarted processes are this test's; twoReplicas stops the first two.
  t.teardown(async () => {
    for (const s of servers) if (s !== a && s !== b) await stopServer(s)
  })
  const api = (i: number) => new Api(servers[i]!.url)
  const tools = [{ name: 'lookup', input_schema: { type: 'object' } }]
  const ids: string[] = []
  for (let i = 0; i < SESSIONS; i++) ids.push(await api(i % 2).createSession({ model: 'openai:gpt-4o-mini', tools }))
  const acks = new Map<string, Ack[]>(ids.map((id) => [id, []]))
  const ackCount = () => [...acks.values()].reduce((n, a) => n + a.length, 0)
  const unexpected: string[] = []
  const stats = { transport: 0, busy: 0, restartedClosures: 0, accepted: [] as number[] }
  const chaos = prng(SEED)
  const load = prng(SEED + 1)

  /** Records a turn response; answers a paused turn's tool calls (on `next`); a 200 is an acknowledgement. */
  const handle = async (id: string, res: ApiResponse, input: string | undefined, next: Api): Promise<void> => {
    if (res.status === 200) {
      const { turn, first_seq, last_seq, status } = res.body
      acks.get(id)!.push({ at: Date.now(), turn, first_seq, last_seq, status, input })
      if (status === 'requires_action') {
        const results = res.body.tool_calls.map((c: any) => ({ tool_call_id: c.id, content: 'ok' }))
        await handle(id, await next.turn(id, { tool_results: results }), undefined, next)
      }
      return
    }
    if (res.status === 409 && res.body.code === 'SESSION_BUSY') {
      stats.busy++
      // A paused turn whose tool results were lost with the killed replica: answer it now.
      const pending: string[] = res.body.data?.pending_tool_call_ids ?? []
      if (pending.length > 0) {
        const results = pending.map((c) => ({ tool_call_id: c, content: 'ok, late' }))
        await handle(id, await next.turn(id, { tool_results: results }), undefined, next)
      } else await sleep(25) // the dead replica's lease has not expired yet
      return
    }
    unexpected.push(`${res.status} ${res.body?.code}: ${res.body?.detail}`)
  }

  /** Whether a thrown error is the transport failing (the connection refused, reset or closed: the replica died, or is down). */
  const transport = (err: unknown) => /^(ECONN|EPIPE|UND_ERR_)/.test(String((err as { code?: unknown }).code ?? ''))

  for (let it = 0; it < ITERATIONS; it++) {
    // Load: every session runs turns back to back, alternating between the replicas; some call tools.
    let stop = false
    const ackedBefore = ackCount()
    const workers = ids.map(async (id, w) => {
      for (let n = 0; !stop; n++) {
        const target = (w + n) % 2
        const r = load()
        if (r < 0.25) fake.enqueue({ toolCalls: [{ name: 'lookup', input: { r } }] })
        else if (r < 0.35) fake.enqueue({ toolCalls: [{ name: 'invented', input: {} }] }, { text: 'after the unknown tool', delayMs: 5 })
        else fake.enqueue({ text: `answer ${r.toFixed(3)} `.repeat(4), chunkSize: 6, delayMs: 10 })
        const input = `s${w} round ${it} turn ${n}`
        try {
          await handle(id, await api(target).turn(id, { input }), input, api(1 - target))
        } catch (err) {
          // Unacknowledged: the request (or the tool results after it) went to the replica that died.
          if (transport(err)) stats.transport++
          else unexpected.push(String(err))
          await sleep(25)
        }
      }
    })

    await sleep(300 + chaos() * 900)
    // Not before the round has acknowledged more turns than the whole run needs per round (checked at
    // the end): on a slow machine the sleep alone may end before the load got going.
    for (const t0 = Date.now(); ackCount() - ackedBefore <= SESSIONS * 2 && Date.now() - t0 < 30_000;) await sleep(10)
    const victim = chaos() < 0.5 ? 0 : 1
    const dead = servers[victim]!
    const exited = once(dead.child, 'exit')
    dead.child.kill('SIGKILL')
    const killedAt = Date.now()
    await exited
    // In some rounds the clients go quiet with the kill: then no request on the other replica finds the
    // dead one's turns first, and they are closed by the restarted replica at start-up or by a sweep.
    const quiet = chaos() < 0.4
    if (quiet) {
      stop = true
      await Promise.all(workers)
    }
    // Down for up to 1.5 leases: the dead one's leases may expire before it is back, or not.
    await sleep(chaos() * 1.5 * LEASE_MS)
    servers[victim] = await spawnServer(envs[victim]!)
    processes.push({ name: names[victim]!, server: servers[victim]! })
    if (!quiet) await sleep(200 + chaos() * 400)
    stop = true
    await Promise.all(workers)
    // Nothing runs now: steps nobody asked for must not leak into the checks.
    await drainScript(fake)

    const other = api(1 - victim)
    const round = `round ${it} (killed ${names[victim]}${quiet ? ', clients quiet' : ''})`
    const checksStart = Date.now()
    let closedInRound = 0
    for (const [w, id] of ids.entries()) {
      const tag = `${round}, session ${w}`
      const row = async () => (await db.query('SELECT running, last_seq FROM sessions WHERE session_id = $1', [id])).rows[0]
      // Recovered: the stored state says no turn runs (the restarted replica closed its predecessor's at start-up).
      let stored = await row()
      while (stored.running && Date.now() - checksStart < ACCEPT_WITHIN_MS) {
        await sleep(50)
        stored = await row()
      }
      t.equal(stored.running, false, `${tag}: no turn left running`)
      const log = await storedLog(db, id)
      t.same(
        log.map((e) => e.seq),
        log.map((_, i) => i + 1),
        `${tag}: seqs gapless 1..${log.length}`,
      )
      t.equal(Number(stored.last_seq), log.length, `${tag}: the session row's last_seq is the log's`)

      // Every acknowledged turn is there, as acknowledged; every input turn once.
      const lost = acks.get(id)!.filter((a) => {
        const first = log[a.first_seq - 1]
        const last = log[a.last_seq - 1]
        const closing = a.status === 'completed' ? 'turn_completed' : 'turn_requires_action'
        if (!first || !last || first.turn !== a.turn || last.turn !== a.turn || last.type !== closing) return true
        return a.input !== undefined && (first.type !== 'turn_started' || first.data.input[0].text !== a.input)
      })
      t.same(lost, [], `${tag}: all ${acks.get(id)!.length} acknowledged turns are in the log`)
      const inputs = log.filter((e) => e.type === 'turn_started' && !e.data.continuation).map((e) => e.data.input[0].text)
      t.equal(new Set(inputs).size, inputs.length, `${tag}: no input ran twice`)

      // Every turn that started has ended, or waits for its tool results; a cut-off one as crash recovery closes it.
      const unclosed = [...new Set(log.map((e) => e.turn))].filter((turn) => {
        const last = log.filter((e) => e.turn === turn).at(-1)!
        return turn > 0 && !['turn_completed', 'turn_failed', 'turn_requires_action'].includes(last.type)
      })
      t.same(unclosed, [], `${tag}: every turn is closed`)
      const failed = log.filter((e) => e.type === 'turn_failed')
      t.same(
        failed.filter((f) => f.data.code !== 'INTERRUPTED' || f.data.reason !== 'process_restarted'),
        [],
        `${tag}: turns failed only as cut off by the kill (INTERRUPTED, process_restarted)`,
      )
      closedInRound += failed.filter((f) => f.data.reason === 'process_restarted').length
      // A paused turn's history ends with the tool calls it waits for: valid once their results follow.
      const record = await storedRecord(db, id)
      const open = record.open_turn
      const answers: Message[] = open
        ? [
            {
              role: 'user',
              content: open.pending_tool_calls.map((c) => ({ type: 'tool_result' as const, tool_use_id: c.id, content: 'ok' })),
            },
          ]
        : []
      t.equal(checkHistory([...record.messages, ...answers]), null, `${tag}: the stored history is valid for a provider`)

      // The replay from the other replica is the stored log, event for event.
      const sse = await other.sse(`/v1/sessions/${id}/events?after=0`)
      const frames = await sse.until((f) => f.data.seq === log.length, 10_000)
      sse.close()
      const replayed = frames.filter((f) => f.id !== undefined).map((f) => f.data)
      t.same(
        replayed.map((e) => ({ seq: e.seq, turn: e.turn, type: e.type, data: e.data })),
        log,
        `${tag}: the SSE replay on the other replica equals the stored log`,
      )
      t.equal((await other.get(`/v1/sessions/${id}`)).body.running, false, `${tag}: the other replica's view is not running`)

      // The next turn is accepted, on either replica (alternating), within the lease and a few seconds.
      const on = api((w + it) % 2)
      let input: string | undefined = `s${w} after round ${it}`
      let res: ApiResponse
      for (;;) {
        res = await on.turn(id, { input })
        const pending: string[] = res.body?.data?.pending_tool_call_ids ?? []
        if (res.status === 409 && pending.length > 0) {
          input = undefined
          res = await on.turn(id, { tool_results: pending.map((c) => ({ tool_call_id: c, content: 'ok, at last' })) })
        }
        if (res.status !== 409 || Date.now() - checksStart > ACCEPT_WITHIN_MS) break
        await sleep(50)
      }
      t.equal(res.status, 200, `${tag}: the next turn is accepted (${res.status} ${res.body?.code ?? ''})`)
      stats.accepted.push(Date.now() - checksStart)
      await handle(id, res, input, on)
      const view = (await on.get(`/v1/sessions/${id}`)).body
      t.equal(checkHistory(view.messages), null, `${tag}: the history after it is valid`)
    }
    stats.restartedClosures = closedInRound
    t.comment(
      `${round}: so far ${stats.transport} requests failed at the transport, ${stats.busy} SESSION_BUSY, ${closedInRound} turns closed as process_restarted; ` +
        `every session took a turn within ${Math.max(...stats.accepted.slice(-SESSIONS))} ms of the checks` +
        (quiet
          ? ''
          : `, and under load within ${Math.max(...ids.map((id) => acks.get(id)!.find((x) => x.at > killedAt)!.at)) - killedAt} ms of the kill`),
    )
  }

  // Who closed the cut-off turns: a restarted replica its predecessor's at start-up, or the other replica one whose lease expired.
  const closings = processes.flatMap((p) =>
    p.server.lines.filter((l) => l.msg === 'closed a turn whose replica stopped').map((l) => l.previous_owner === p.name),
  )
  t.comment(
    `cut-off turns closed at a restart: ${closings.filter((own) => own).length}; by the other replica: ${closings.filter((own) => !own).length}`,
  )
  t.same(unexpected, [], 'clients got only acknowledgements, SESSION_BUSY, or a dead connection')
  t.same(
    fake.requests.filter((r) => r.rejected).map((r) => r.rejected),
    [],
    'the provider never saw an invalid history',
  )
  const acked = ackCount()
  t.comment(`${acked} acknowledged turns over ${ITERATIONS} kills`)
  t.ok(acked > ITERATIONS * SESSIONS * 2, 'turns were acknowledged between the kills')
  t.ok(stats.restartedClosures > 0, 'the kills cut turns off (and recovery closed them)')
  t.ok(stats.transport > 0, 'requests to the killed replicas failed at the transport level')
  for (const s of servers) if (s !== a && s !== b) await stopServer(s)
})

/** Consumes the scripted steps nobody will ask for any more. */
async function drainScript(fake: FakeLlmServer): Promise<void> {
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
