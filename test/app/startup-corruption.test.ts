// Random bytes at random offsets over the pages of an LMDB data file the real server wrote (issue 34,
// item 3): each start of the real server on such a copy is refused with exit 78 and one line naming
// the file — never SIGBUS, SIGSEGV, an abort, or a stack trace. Seeded and reproducible:
// BURROW_FUZZ_SEED=<first seed> and BURROW_FUZZ_SEEDS=<count> choose the seeds; every assertion
// names its seed.
//
// LMDB keeps no checksum of a key or a value, so not all damage can be found before it is read. A
// start must be refused when the damage covers what a reader of the file follows (a page's number or
// its flags and bounds, a whole node header, an overflow or database reference) or a value of the
// session store (JSON text, checked at start-up); damage confined to keys (found when it breaks their
// order), to the memory store's msgpack values, or to a page's unused bytes may start. A store that
// starts is then read through the API — every session, its events, a memory search — and must answer
// each read (a damaged value may be an error, never a crash); damage only in unused bytes must change
// nothing a reader sees. The meta seeds hit the meta LMDB would open.
import t, { type Test } from 'tap'
import { open, readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { Api } from '../helpers/harness.js'
import { startServer, stopServer } from '../helpers/child-server.js'
import { assertRefused, copyDataDir, DURABLE_ENV, startOn } from '../helpers/startup-faults.js'
import { tempDir } from '../helpers/temp-dir.js'
import { lmdbTreePages, type TreePage } from '../helpers/lmdb-pages.js'
import { rounds } from '../helpers/thoroughness.js'

const FIRST = Number(process.env.BURROW_FUZZ_SEED ?? 1)
const COUNT = rounds(10, 48, process.env.BURROW_FUZZ_SEEDS)
const PARALLEL = 4
// A start of the real server takes 2 to 10 s by the machine's load; each takes one of PARALLEL slots.
t.setTimeout(Math.max(120_000, COUNT * 15_000))
const STORES = { session: ['lmdb', 'data.mdb'], memory: ['memory', 'lmdb', 'data.mdb'] } as const

/** mulberry32: a small seeded generator, so a seed always writes the same bytes at the same places. */
function rng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

/** A data directory the real server wrote: sessions with turns of many sizes (overflow pages too), memory entries. */
async function writeRealisticDataDir(t: Test): Promise<string> {
  const dataDir = join(await tempDir(t, 'corruption'), 'data')
  const out = await startServer({ ...DURABLE_ENV, BURROW_DATA_DIR: dataDir })
  if (out.kind !== 'listening') throw new Error(`the server did not start: ${out.stderr}`)
  try {
    const api = new Api(out.server.url)
    for (let i = 0; i < 24; i++) {
      const id = await api.createSession({ memory: i % 2 === 0, metadata: { n: String(i) } })
      for (let k = 0; k <= i % 3; k++) {
        const turn = await api.turn(id, {
          input: `session ${i} turn ${k}: ${'words of a question '.repeat(1 + ((i * 37 + k * 11) % 300))}`,
        })
        if (turn.status !== 200) throw new Error(`turn failed: ${JSON.stringify(turn.body)}`)
      }
    }
    const entries = Array.from({ length: 120 }, (_, i) => ({ content: `Note ${i}: ${'invoice paid on March 3rd '.repeat(1 + (i % 40))}` }))
    const added = await api.post('/v1/memory', entries)
    if (added.status >= 300) throw new Error(`memory add failed: ${JSON.stringify(added.body)}`)
  } finally {
    await stopServer(out.server)
  }
  return dataDir
}

interface Damage {
  seed: number
  store: keyof typeof STORES
  runs: Array<{ at: number; length: number }>
  /** The damage covers something a reader follows, or a value start-up checks: the start must be refused. */
  mustRefuse: boolean
  /** Every run lies in a page's unused bytes: the store must start and read as before. */
  harmless: boolean
  where: string
}

/** The named databases whose values start-up checks (src/store/lmdb-value-checks.ts). */
const CHECKED: Record<keyof typeof STORES, (db: string) => boolean> = {
  session: (db) => db !== 'meta',
  memory: (db) => db === 'idempotency',
}

const overlaps = (a: number, b: number, [from, to]: [number, number]) => a < to && from < b

/** What a seed writes: over the meta LMDB would open, or one to three runs over pages the trees use. */
function plan(seed: number, pages: Record<keyof typeof STORES, { ps: number; meta: number; tree: TreePage[] }>): Damage {
  const r = rng(seed)
  const store = seed % 2 === 0 ? 'session' : 'memory'
  const { ps, meta, tree } = pages[store]
  if (seed % 6 === 5) {
    // From the start of the MDB_meta (its magic number) on: 32 to 144 bytes.
    const at = meta * ps + 24
    return {
      seed,
      store,
      runs: [{ at, length: 32 + Math.floor(r() * 113) }],
      mustRefuse: true,
      harmless: false,
      where: `meta page ${meta}`,
    }
  }
  const runs: Damage['runs'] = []
  let mustRefuse = false
  let harmless = true
  const where: string[] = []
  for (let n = 1 + Math.floor(r() * 3); n > 0; n--) {
    const page = tree[Math.floor(r() * tree.length)]!
    const offset = Math.floor(r() * ps)
    const length = Math.min(ps - offset, 32 + Math.floor(r() * (ps / 2)))
    runs.push({ at: page.pgno * ps + offset, length })
    const follows = page.followed.some(([from, to]) => offset <= from && to <= offset + length)
    const value = page.values.find((v) => CHECKED[store](v.db) && overlaps(offset, offset + length, v.range))
    const unused = page.free[0] <= offset && offset + length <= page.free[1]
    mustRefuse ||= follows || value !== undefined
    harmless &&= unused
    const what = follows
      ? ''
      : value
        ? ` (a value of '${value.db}')`
        : unused
          ? ' (unused bytes only)'
          : ' (keys, unchecked values or unused bytes)'
    where.push(`page ${page.pgno} (${page.kind}) bytes ${offset}…${offset + length}${what}`)
  }
  return { seed, store, runs, mustRefuse, harmless, where: where.join(', ') }
}

/** Everything a client reads of the store, as one comparable value: each answer's status and body, or the error that stopped it. */
async function readEverything(url: string): Promise<unknown[]> {
  const api = new Api(url)
  const out: unknown[] = []
  const read = async (path: string) => {
    try {
      const r = await api.get(path)
      out.push({ path, status: r.status, body: r.body })
      return r
    } catch (err) {
      out.push({ path, error: (err as Error).message })
      return undefined
    }
  }
  const list = await read('/v1/sessions?limit=100')
  for (const s of list?.status === 200 ? (list.body.items as Array<{ session_id: string }>) : []) {
    await read(`/v1/sessions/${s.session_id}`)
    await read(`/v1/sessions/${s.session_id}/event-log?after=0&limit=1000`)
  }
  await read(`/v1/memory/search?q=${encodeURIComponent('invoice paid')}&limit=20`)
  return out
}

async function damage(file: string, d: Damage): Promise<void> {
  const r = rng(d.seed ^ 0x5eed)
  const fh = await open(file, 'r+')
  try {
    for (const run of d.runs) {
      const bytes = Buffer.from(Array.from({ length: run.length }, () => Math.floor(r() * 256)))
      await fh.write(bytes, 0, bytes.length, run.at)
    }
  } finally {
    await fh.close()
  }
}

async function pool<T, R>(items: T[], n: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length)
  let next = 0
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) {
        const i = next++
        out[i] = await fn(items[i]!)
      }
    }),
  )
  return out
}

t.test('random bytes over LMDB pages: exit 78 naming the file, never a crash', async (t) => {
  const template = await writeRealisticDataDir(t)
  const pages = {} as Parameters<typeof plan>[1]
  for (const [store, path] of Object.entries(STORES) as Array<[keyof typeof STORES, readonly string[]]>) {
    const file = join(template, ...path)
    const found = lmdbTreePages(await readFile(file))
    pages[store] = found
    t.comment(`${file.slice(template.length + 1)}: ${(await stat(file)).size} bytes, ${found.tree.length} tree pages`)
  }

  let before: unknown[] = []
  t.test('the undamaged copy starts', async (t) => {
    const out = await startOn(await copyDataDir(t, template))
    t.equal(out.kind, 'listening', out.kind === 'exited' ? out.stderr : 'listening')
    if (out.kind === 'listening') {
      try {
        before = await readEverything(out.server.url)
      } finally {
        await stopServer(out.server)
      }
    }
    t.ok(before.length > 24 * 2, `${before.length} reads`)
    t.notOk(
      before.some((r: any) => r.error || r.status !== 200),
      'every read of the undamaged copy answers 200',
    )
  })

  const seeds = Array.from({ length: COUNT }, (_, i) => FIRST + i)
  const plans = seeds.map((s) => plan(s, pages))
  const outcomes = await pool(plans, PARALLEL, async (d) => {
    const dir = await copyDataDir(t, template)
    const file = join(dir, ...STORES[d.store])
    await damage(file, d)
    const out = await startOn(dir)
    if (out.kind === 'listening') {
      let reads: unknown[]
      let alive: boolean
      try {
        reads = await readEverything(out.server.url)
        alive = out.server.child.exitCode === null && out.server.child.signalCode === null
      } finally {
        await stopServer(out.server)
      }
      return { d, file, out: { kind: 'listening' as const, reads, alive } }
    }
    return { d, file, out }
  })
  let refused = 0
  const started: number[] = []
  for (const { d, file, out } of outcomes) {
    t.test(`seed ${d.seed}: ${d.store} store, ${d.where}`, async (t) => {
      if (out.kind === 'listening') {
        started.push(d.seed)
        t.notOk(d.mustRefuse, `seed ${d.seed}: the server started on damage it must refuse`)
        t.ok(out.alive, `seed ${d.seed}: the server lived through reading everything`)
        const failed = out.reads.filter((r: any) => r.error || (r.status >= 500 && r.body?.code === undefined))
        t.same(failed, [], `seed ${d.seed}: every read answered, with a coded problem where it failed`)
        if (d.harmless) t.same(out.reads, before, `seed ${d.seed}: damage in unused bytes changes nothing a reader sees`)
        return
      }
      t.not(out.signal, 'SIGBUS', `seed ${d.seed}: no SIGBUS`)
      const line = await assertRefused(t, out, [file])
      if (out.code === 78) refused++
      t.match(line, /backup/, `seed ${d.seed}: says to restore from a backup`)
      if (out.code !== 78 || out.signal) t.comment(`seed ${d.seed}: ${out.code ?? out.signal}: ${out.stderr}`)
    })
  }
  t.test('summary', async (t) => {
    t.comment(`seeds ${FIRST}…${FIRST + COUNT - 1}: ${refused} refused with exit 78; started: ${started.join(', ') || 'none'}`)
    t.ok(refused >= plans.filter((p) => p.mustRefuse).length, 'every damage a reader follows or start-up checks was refused')
  })
})
