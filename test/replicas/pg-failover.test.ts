// kill -9 of one of two real server processes on one PostgreSQL database, in the middle of turns:
// the other replica takes the dead one's sessions once their leases expire — on the next request
// (within the lease + 2 s) or by its sweeper without one — closing the cut-off turns as crash
// recovery does; a paused turn survives and is answered on the other replica; nothing
// acknowledged is lost, the logs stay gapless and the histories valid.
import t from 'tap'
import { checkHistory } from '../../src/core/messages.js'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { Api, eventually } from '../helpers/harness.js'
import { assertGapless, storedLog, twoReplicas } from './replicas.js'

const LEASE_MS = 2000

t.test('kill -9 of a replica mid-turn: the other recovers its sessions within the lease, nothing acknowledged lost', async (t) => {
  const fake = await startFakeLlm({ openaiKey: 'k' })
  const { a, b, db } = await twoReplicas(t, { prefix: 'failover', leaseMs: LEASE_MS, llmUrl: fake.url })
  t.teardown(() => fake.close())
  const A = new Api(a.url)
  const B = new Api(b.url)
  const model = 'openai:gpt-4o-mini'
  const tools = [{ name: 'lookup', input_schema: { type: 'object' } }]

  // Acknowledged turns on both replicas, on one session.
  const shared = await A.createSession({ model })
  const acked: string[] = []
  for (let i = 0; i < 6; i++) {
    const input = `acknowledged ${i}`
    fake.enqueue({ text: `answer ${i}` })
    const r = await (i % 2 === 0 ? A : B).turn(shared, { input })
    t.equal(r.status, 200)
    acked.push(input)
  }
  // A paused turn on A (a client tool call), and two turns A is running when it dies.
  const paused = await A.createSession({ model, tools })
  fake.enqueue({ toolCalls: [{ name: 'lookup', input: { q: 'x' } }] })
  const pause = await A.turn(paused, { input: 'look it up' })
  t.equal(pause.body.status, 'requires_action')
  const callId = pause.body.tool_calls[0].id
  const cut = await A.createSession({ model })
  const swept = await A.createSession({ model })
  // One whose lease B held before A's: B must still see a dead replica's turn, not one it abandoned itself.
  const returned = await A.createSession({ model })
  fake.enqueue({ text: 'first on B' })
  t.equal((await B.turn(returned, { input: 'on B first' })).status, 200)
  const before = fake.requests.length
  fake.enqueue(
    { text: 'never heard', delayMs: 10_000 },
    { text: 'never heard either', delayMs: 10_000 },
    { text: 'nor this', delayMs: 10_000 },
  )
  void A.turn(cut, { input: 'cut off' }).catch(() => undefined)
  void A.turn(swept, { input: 'swept' }).catch(() => undefined)
  void A.turn(returned, { input: 'back on A' }).catch(() => undefined)
  await eventually(() => fake.requests.length >= before + 3, 5000)

  a.child.kill('SIGKILL')
  const killed = Date.now()
  // The next request on B: SESSION_BUSY while the dead replica's lease runs, then accepted.
  fake.enqueue({ text: 'recovered on B' })
  let busy = 0
  const next = await eventually(async () => {
    const r = await B.turn(cut, { input: 'after the kill' })
    if (r.status === 409 && r.body.code === 'SESSION_BUSY') busy++
    else return r
    return undefined
  }, LEASE_MS + 5000)
  const acceptedMs = Date.now() - killed
  t.comment(`the next turn was accepted on B ${acceptedMs} ms after kill -9 (lease ${LEASE_MS} ms; ${busy} SESSION_BUSY before)`)
  t.match(next!.body, { turn: 2, status: 'completed', output_text: 'recovered on B' })
  t.ok(acceptedMs <= LEASE_MS + 2000, 'within the lease + 2 s')
  t.ok(busy > 0, 'refused while the dead replica’s lease had not expired')

  // Nobody asks for the other sessions: B's sweeper closes their turns.
  for (const id of [swept, returned])
    await eventually(
      async () => (await db.query('SELECT running FROM sessions WHERE session_id = $1', [id])).rows[0].running === false,
      2 * LEASE_MS + 3000,
    )
  t.comment(`the sweeper closed the untouched turns ${Date.now() - killed} ms after kill -9`)

  for (const [id, turn] of [
    [cut, 1],
    [swept, 1],
    [returned, 2],
  ] as const) {
    const failed = (await storedLog(db, id)).filter((e) => e.type === 'turn_failed')
    t.match(failed, [{ turn, data: { code: 'INTERRUPTED', reason: 'process_restarted' } }], 'closed once, as crash recovery closes a turn')
    t.equal(failed.length, 1)
  }
  t.equal(
    b.lines.filter((l) => l.msg === 'closed a turn whose replica stopped' && l.previous_owner === 'replica-a').length,
    3,
    'B logged whose turns it closed',
  )

  // The paused turn survived: B takes its tool results and completes it.
  fake.enqueue({ text: 'looked up' })
  const resumed = await B.turn(paused, { tool_results: [{ tool_call_id: callId, content: 'found' }] })
  t.match(resumed.body, { turn: 1, status: 'completed', output_text: 'looked up' })

  // Nothing acknowledged lost; every log gapless, every history valid; every session takes a turn on B.
  const inputs = (await storedLog(db, shared)).filter((e) => e.type === 'turn_started').map((e) => e.data.input[0].text)
  t.same(inputs, acked, 'every acknowledged turn is in the log')
  for (const id of [shared, paused, cut, swept, returned]) {
    const log = await storedLog(db, id)
    assertGapless(t, log)
    fake.enqueue({ text: 'and on' })
    t.equal((await B.turn(id, { input: 'one more' })).status, 200)
    t.equal(checkHistory((await B.get(`/v1/sessions/${id}`)).body.messages), null)
  }
})
