// The search lane (search-lane.ts) between a real LaneClient and a real IndexHost, in one
// thread: the host's `wake` is handled when the test delivers it, so every interleaving the two
// threads can meet is played out in order — the answer read from shared memory, a wake only
// when the worker does not watch, the client giving up and the answer coming by message, a
// failed search, and the messages sent before a lane request handled before it.
import t, { type Test } from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DEFAULT_HNSW } from '../../src/memory/hnsw-params.js'
import { IndexHost } from '../../src/memory/index-host.js'
import type { FromWorker, SearchReply, ToWorker } from '../../src/memory/index-worker-protocol.js'
import { GAVE_UP, IDLE, LANE_HOT_MS, LANE_MAX_K, LANE_WAIT_MS, LaneClient, LaneMemory } from '../../src/memory/search-lane.js'

const DIM = 16
const N = 200

function vector(label: number): number[] {
  const v = Array.from({ length: DIM }, (_, i) => Math.sin((label + 1) * (i + 1) * 0.7) + (i === label % DIM ? 2 : 0))
  const n = Math.hypot(...v)
  return v.map((c) => c / n)
}

const turn = () => new Promise<void>((r) => setImmediate(r))
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** A host with an index of N labels, its lane, and a client whose wakes are queued for the test to deliver. */
function setup(t: Test) {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-lane-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const memory = LaneMemory.create(DIM)
  const out: FromWorker[] = []
  const port: ToWorker[] = []
  const host = new IndexHost(
    { dir, dim: DIM, params: DEFAULT_HNSW, lane: memory.buffer },
    (m) => out.push(m),
    () => port.shift(),
  )
  host.handle({ type: 'open', id: 1, key: 'k', epoch: 7, labelsBelow: 0, tombstones: [], fresh: true })
  const labels = Array.from({ length: N }, (_, i) => i)
  const vectors = new Float32Array(N * DIM)
  labels.forEach((l) => vectors.set(vector(l), l * DIM))
  host.handle({ type: 'add', key: 'k', epoch: 7, labels: Float64Array.from(labels), vectors, upTo: N })
  host.handle({ type: 'flush', id: 2, ms: 10_000 })
  out.length = 0
  const wakes: number[] = []
  const client = new LaneClient(memory, () => wakes.push(1))
  /** Asks through the lane; the answer, from shared memory or by message. */
  const ask = (id: number, label: number, k = 3, key = 'k') => {
    let pending = true
    let fromLane: SearchReply | undefined
    const taken = client.ask(
      id,
      { key, vector: vector(label), k },
      (r) => {
        fromLane = r
        pending = false
      },
      () => pending,
    )
    return {
      taken,
      /** Resolves with where the answer came from. */
      async answer(): Promise<{ via: 'lane' | 'message'; reply: FromWorker | SearchReply }> {
        for (let i = 0; i < 20_000; i++) {
          if (fromLane) return { via: 'lane', reply: fromLane }
          const m = out.find((x) => x.type === 'reply' && x.id === id)
          if (m) {
            pending = false
            return { via: 'message', reply: m }
          }
          await turn()
        }
        throw new Error(`request ${id} was never answered`)
      },
    }
  }
  return { host, memory, out, port, wakes, ask }
}

t.test('a lone search is answered through shared memory, as a message search would be', async (t) => {
  const { host, memory, out, wakes, ask } = setup(t)
  host.handle({ type: 'search', id: 10, key: 'k', vector: Float64Array.from(vector(42)), k: 3 })
  const byMessage = (out.pop() as { value: SearchReply }).value

  const a = ask(11, 42)
  t.ok(a.taken, 'the free lane takes the request')
  t.equal(wakes.length, 1, 'the worker does not watch yet: one wake message')
  host.handle({ type: 'wake' })
  const got = await a.answer()
  t.equal(got.via, 'lane')
  const reply = got.reply as SearchReply
  t.same([...reply.labels], [...byMessage.labels], 'the same labels')
  t.same([...reply.scores], [...byMessage.scores], 'the same scores')
  t.match(reply, { covered: N, epoch: 7 })
  t.equal([...reply.labels][0], 42, 'the nearest is the label itself')
  t.equal(out.filter((m) => m.type === 'reply').length, 0, 'no reply message went out')
  t.equal(memory.state(), IDLE, 'the slot is free again')

  // Right after, the worker still watches the slot (unless this machine took longer than
  // LANE_HOT_MS to get here): no wake is needed.
  const watching = memory.awake()
  const b = ask(12, 7)
  t.ok(b.taken)
  t.equal(wakes.length, watching ? 1 : 2, watching ? 'no wake while the worker watches' : 'a wake: the worker had stopped watching')
  if (!watching) host.handle({ type: 'wake' })
  const got2 = await b.answer()
  t.equal(got2.via, 'lane')
  t.equal([...(got2.reply as SearchReply).labels][0], 7)

  // Once it stopped watching, a request wakes it again.
  await sleep(LANE_HOT_MS * 5)
  for (let i = 0; i < 1000 && memory.awake(); i++) await sleep(1)
  t.notOk(memory.awake(), 'the worker stops watching soon after')
  const before = wakes.length
  const c = ask(13, 9)
  t.ok(c.taken)
  t.equal(wakes.length, before + 1, 'a wake once the worker stopped watching')
  host.handle({ type: 'wake' })
  t.equal(((await c.answer()).reply as SearchReply).labels[0], 9)
})

t.test('one request at a time: a busy slot, too many results or a long key go by message', async (t) => {
  const { host, ask } = setup(t)
  const a = ask(20, 1)
  t.ok(a.taken)
  t.notOk(ask(21, 2).taken, 'the slot holds a request')
  host.handle({ type: 'wake' })
  await a.answer()
  t.notOk(ask(22, 2, LANE_MAX_K + 1).taken, `k above ${LANE_MAX_K}`)
  t.notOk(ask(23, 2, 3, 'x'.repeat(500)).taken, 'a key longer than the slot')
  t.ok(ask(24, 2).taken, 'and the slot is free for the next')
})

t.test('the client gives up on a worker busy for longer than LANE_WAIT_MS: the answer comes by message, once', async (t) => {
  const { host, memory, out, wakes, ask } = setup(t)
  const a = ask(30, 100)
  t.equal(wakes.length, 1)
  // The wake is not delivered: the worker is inside a long call.
  await sleep(LANE_WAIT_MS * 3)
  for (let i = 0; i < 10; i++) await turn()
  t.equal(memory.state(), GAVE_UP, 'the client stopped waiting on the lane')
  host.handle({ type: 'wake' })
  const got = await a.answer()
  t.equal(got.via, 'message')
  t.match(got.reply, { type: 'reply', id: 30, ok: true })
  t.equal(((got.reply as { value: SearchReply }).value.labels as Float64Array)[0], 100)
  t.equal(memory.state(), IDLE, 'the worker freed the slot')
  t.equal(out.filter((m) => m.type === 'reply' && m.id === 30).length, 1, 'answered once')
  const b = ask(31, 5)
  t.ok(b.taken, 'the lane is used again')
  host.handle({ type: 'wake' })
  t.equal((await b.answer()).via, 'lane')
})

t.test('a failed search is answered by message as a failure, and frees the slot', async (t) => {
  const { host, memory, ask } = setup(t)
  const a = ask(40, 1, 3, 'not-open')
  t.ok(a.taken)
  host.handle({ type: 'wake' })
  const got = await a.answer()
  t.equal(got.via, 'message')
  t.match(got.reply, { type: 'reply', id: 40, ok: false, message: /no index is open/ })
  t.equal(memory.state(), IDLE)
})

t.test('messages sent before a lane request are handled before it: a deletion, then the search', async (t) => {
  const { host, port, ask } = setup(t)
  port.push({ type: 'delete', key: 'k', labels: [42] })
  const a = ask(50, 42)
  host.handle({ type: 'wake' })
  const reply = (await a.answer()).reply as SearchReply
  t.notOk([...reply.labels].includes(42), 'the deleted label is gone from the answer')
  t.equal(port.length, 0, 'the port was drained first')
})
