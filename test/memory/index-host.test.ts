// The index worker's host, without a thread: inserts are made a slice at a time, and messages
// waiting on the port are handled between two inserts — in their order, so a deletion sent
// before a search is applied before it, and a flush waits for the slice's end.
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DEFAULT_HNSW } from '../../src/memory/hnsw-params.js'
import { IndexHost } from '../../src/memory/index-host.js'
import type { FromWorker, SearchReply, ToWorker } from '../../src/memory/index-worker-protocol.js'

const DIM = 32

/** A deterministic unit vector per label (mulberry32 seeded by the label). */
function vector(label: number): number[] {
  let a = label + 1
  const next = () => {
    a = (a + 0x6d2b79f5) | 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 2 ** 32 - 0.5
  }
  const v = Array.from({ length: DIM }, next)
  const n = Math.hypot(...v)
  return v.map((c) => c / n)
}

function add(labels: number[], upTo: number): ToWorker {
  const vectors = new Float32Array(labels.length * DIM)
  labels.forEach((l, i) => vectors.set(vector(l), i * DIM))
  return { type: 'add', key: 'k', epoch: 1, labels: Float64Array.from(labels), vectors, upTo }
}

const turn = () => new Promise<void>((r) => setImmediate(r))

t.test('a search and a deletion waiting on the port are handled between two inserts, in order; a flush waits for the slice', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-index-host-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const out: FromWorker[] = []
  const port: ToWorker[] = []
  let polls = 0
  // The messages "arrive" on the port after the 50th poll, i.e. in the middle of the first slice.
  const host = new IndexHost(
    { dir, dim: DIM, params: DEFAULT_HNSW },
    (m) => out.push(m),
    () => (++polls > 50 ? port.shift() : undefined),
  )
  host.handle({ type: 'open', id: 1, key: 'k', epoch: 1, labelsBelow: 0, tombstones: [], fresh: true })
  t.match(out.shift(), { type: 'reply', id: 1, ok: true, value: { covered: 0, from: 'fresh' } })

  const n = 3000
  host.handle(
    add(
      Array.from({ length: n }, (_, i) => i),
      n,
    ),
  )
  port.push(
    { type: 'delete', key: 'k', labels: [10] },
    { type: 'search', id: 2, key: 'k', vector: Float64Array.from(vector(10)), k: 3 },
    { type: 'flush', id: 3, ms: 10_000 },
    { type: 'search', id: 4, key: 'k', vector: Float64Array.from(vector(n - 1)), k: 1 },
  )
  // The messages arrive after the 50th insert: in the first slice, or a later one when inserts are slow (a loaded machine).
  for (let i = 0; i < 10_000 && !out.some((m) => m.type === 'reply' && m.id === 2); i++) await turn()
  const first = out.findIndex((m) => m.type === 'reply' && m.id === 2)
  t.ok(first >= 0, 'the search is answered while the inserts go on')
  const search = (out[first] as { value: SearchReply }).value
  t.ok(search.covered > 10 && search.covered < n, `between two inserts (${search.covered} of ${n} in)`)
  t.notOk([...search.labels].includes(10), 'after the deletion sent before it')
  const flushed = out.findIndex((m) => m.type === 'reply' && m.id === 3)
  t.ok(flushed > first, 'the flush is answered after the slice')
  t.match(out.slice(first + 1, flushed).at(-1), { type: 'progress', covered: n }, 'having inserted everything first')
  const last = out.find((m) => m.type === 'reply' && m.id === 4) as { value: SearchReply } | undefined
  t.same([...last!.value.labels], [n - 1], 'and the search after the flush sees it all')
})

t.test('a search right behind a small add finds it in the index (made first), not only in the waiting vectors', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-index-host-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const out: FromWorker[] = []
  const host = new IndexHost({ dir, dim: DIM, params: DEFAULT_HNSW }, (m) => out.push(m))
  host.handle({ type: 'open', id: 1, key: 'k', epoch: 1, labelsBelow: 0, tombstones: [], fresh: true })
  host.handle(add([0, 1, 2], 3))
  host.handle({ type: 'search', id: 2, key: 'k', vector: Float64Array.from(vector(1)), k: 1 })
  host.handle({ type: 'score', id: 3, key: 'k', vector: Float64Array.from(vector(1)), labels: Float64Array.from([1, 2]) })
  const search = out.find((m) => m.type === 'reply' && m.id === 2) as { value: SearchReply }
  t.match(search.value, { covered: 3 })
  t.same([...search.value.labels], [1])
  const score = out.find((m) => m.type === 'reply' && m.id === 3) as { value: { labels: Float64Array } }
  t.same([...score.value.labels], [1, 2], 'scored against the index')
  t.match(
    out.findLast((m) => m.type === 'progress'),
    { covered: 3 },
    'and the progress is reported before the answer',
  )
  await turn()
})
