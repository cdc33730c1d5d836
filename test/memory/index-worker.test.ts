// The HNSW indexes live in a worker thread. A worker that dies — here stopped as a crash would
// stop it — is logged and started again, and its indexes are loaded (or rebuilt) again; no
// call fails meanwhile: the keyword side and the vectors waiting in memory answer.
import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import type { NewMemoryEntry } from '../../src/core/memory-store.js'
import { HashedEmbedder } from '../../src/memory/hashed-embedder.js'
import { HnswMemoryStore } from '../../src/memory/hnsw-memory-store.js'
import { LONE_AFTER_MS } from '../../src/memory/memory-core.js'
import { eventually } from '../helpers/harness.js'

const embedder = new HashedEmbedder()
const entry = (content: string): NewMemoryEntry => ({ tenant: 'acme', content, session_id: null, turn: null, seq: null })
const SHIPS = ['Aurora', 'Borealis', 'Cygnus', 'Draco']
const text = (i: number) => `Record ${i}: crate ${(i * 7919) % 10007} left dock ${i % 13} on ship ${SHIPS[i % 4]} at ${i % 24}h.`

async function openStore(dir: string, logs: any[]): Promise<HnswMemoryStore> {
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l.trim()) logs.push(JSON.parse(l))
      cb()
    },
  })
  return HnswMemoryStore.open({ dataDir: dir, embedder, durability: 'relaxed', logger: pino({ level: 'debug' }, sink) })
}

const STOPPED = /^the memory index worker stopped/
const top = async (store: HnswMemoryStore, q: string, mode?: 'vector' | 'keyword') =>
  (await store.search({ tenant: 'acme', text: q, limit: 1, ...(mode ? { mode } : {}) }))[0]?.entry.content

t.test('the worker dies while it loads an index: searches answer, adds are acknowledged, the index comes back', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-index-worker-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const logs: any[] = []
  let store = await openStore(dir, logs)
  const n = 3000
  for (let i = 0; i < n; i += 1000) await store.add(Array.from({ length: 1000 }, (_, j) => entry(text(i + j))))
  await eventually(() => store.indexBacklog() === 0, 30_000)
  await store.close()

  logs.length = 0
  store = await openStore(dir, logs)
  t.teardown(() => store.close())
  // The first search asks the worker to load the saved file; the worker is stopped before it answers.
  const first = store.search({ tenant: 'acme', text: text(1234), limit: 3 })
  t.equal(store.indexCovered('acme'), 0, 'the index is being loaded')
  await store.crashIndexWorker()
  const hits = await first
  t.equal(hits[0]?.entry.content, text(1234), 'the search answers (by its words) while the worker is gone')
  t.equal(
    (await store.add([entry('A new fact while the worker is down: the lighthouse at Cape Wrath.')])).length,
    1,
    'an add is acknowledged',
  )
  t.equal(
    await top(store, 'new fact while the worker is down lighthouse Cape Wrath', 'vector'),
    'A new fact while the worker is down: the lighthouse at Cape Wrath.',
    'and found at once by its vector, waiting in memory',
  )

  t.match(
    await eventually(() => logs.find((l) => STOPPED.test(l.msg))),
    { level: 50, exit_code: Number, restart_in_ms: Number },
    'the stop is logged as an error',
  )
  t.ok(
    await eventually(() => store.indexCovered('acme') === n + 1 && store.indexBacklog() === 0, 30_000),
    'a new worker loads the index and inserts what waited',
  )
  t.equal(await top(store, text(2999), 'vector'), text(2999), 'through the index again')
  t.equal(logs.filter((l) => STOPPED.test(l.msg)).length, 1, 'one stop, one restart')
  t.same(
    logs.filter((l) => l.level >= 40 && !STOPPED.test(l.msg)),
    [],
    'the saved file loads without a warning',
  )
})

t.test(
  'the worker dies during a backlog of inserts, twice: nothing fails, nothing is lost, the index catches up and is saved',
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'burrow-index-worker-'))
    t.teardown(() => rm(dir, { recursive: true, force: true }))
    const logs: any[] = []
    let store = await openStore(dir, logs)
    const n = 4000
    for (let i = 0; i < n; i += 1000) await store.add(Array.from({ length: 1000 }, (_, j) => entry(text(i + j))))
    for (let round = 0; round < 2; round++) {
      t.ok(store.indexBacklog() > 0, `round ${round + 1}: stopped while ${store.indexBacklog()} entries wait for the index`)
      await store.crashIndexWorker()
      for (const i of [17, 1999, n - 1]) {
        // Whether its vector waits in memory or went with the worker (then it is embedded for the search).
        t.equal(await top(store, text(i)), text(i), `round ${round + 1}: entry ${i} is found first`)
      }
      await eventually(() => logs.filter((l) => l.msg === 'the memory index worker was started again').length === round + 1, 30_000)
    }
    t.ok(await eventually(() => store.indexBacklog() === 0, 60_000), 'the index catches up')
    for (const i of [0, 2500, n - 1]) t.equal(await top(store, text(i), 'vector'), text(i), `entry ${i} through the index`)
    t.equal(logs.filter((l) => STOPPED.test(l.msg)).length, 2, 'two stops logged')
    await store.close()
    logs.length = 0
    store = await openStore(dir, logs)
    t.teardown(() => store.close())
    t.equal(await top(store, text(3333), 'vector'), text(3333))
    t.equal(store.indexCovered('acme'), n, 'the file saved at close covers every entry')
    t.same(
      logs.filter((l) => l.level >= 40),
      [],
      'and loads without a warning',
    )
  },
)

t.test(
  'a lone search takes the search lane, searches at once go by message, with the same answers; a crash with a lane request pending answers',
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'burrow-index-worker-'))
    t.teardown(() => rm(dir, { recursive: true, force: true }))
    const logs: any[] = []
    const store = await openStore(dir, logs)
    t.teardown(() => store.close())
    const n = 2000
    for (let i = 0; i < n; i += 1000) await store.add(Array.from({ length: 1000 }, (_, j) => entry(text(i + j))))
    await eventually(() => store.indexBacklog() === 0, 30_000)
    await store.save()
    const queries = Array.from({ length: 16 }, (_, i) => text(i * 97))
    const search = (q: string) => store.search({ tenant: 'acme', text: q, limit: 5 })

    // A lane request the worker does not take within LANE_WAIT_MS (a loaded machine) is answered by message: most, not all, are asked for.
    const before = store.laneAnswers()
    const alone: string[][] = []
    for (const q of queries) alone.push((await search(q)).map((h) => h.entry.id))
    t.ok(
      store.laneAnswers() - before >= queries.length * 0.75,
      `lone searches are answered through the lane (${store.laneAnswers() - before} of ${queries.length})`,
    )
    t.same(
      alone.map((ids) => ids.length),
      queries.map(() => 5),
      'with full answers',
    )

    const mid = store.laneAnswers()
    const together = await Promise.all(queries.map((q) => search(q)))
    t.ok(store.laneAnswers() - mid <= 1, 'searches at once: at most the first takes the lane')
    t.same(
      together.map((hits) => hits.map((h) => h.entry.id)),
      alone,
      'the same answers either way',
    )

    // A lone search (none has overlapped another for LONE_AFTER_MS) whose lane request is pending when the worker stops: answered, not hung.
    await new Promise((r) => setTimeout(r, LONE_AFTER_MS * 2))
    const pending = search(text(1500))
    await store.crashIndexWorker()
    t.equal((await pending)[0]?.entry.content, text(1500), 'the search answers while the worker is gone')
    const after = store.laneAnswers()
    t.ok(
      await eventually(async () => (await search(queries[3]!)) && store.laneAnswers() > after, 30_000),
      'a new worker starts, and answers through its own lane',
    )
    for (const [i, q] of queries.entries())
      t.same(
        (await search(q)).map((h) => h.entry.id),
        alone[i],
        `search ${i} again, the same answer`,
      )
  },
)
