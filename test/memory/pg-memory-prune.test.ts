// Memory on PostgreSQL forgets old deletions (PgMemoryLog.pruneDeletions): only the deletions past
// the retention go, and a store prunes by itself when it opens; a local copy that had not replayed
// deletions that were then forgotten — running, or restarted on its data directory — compares
// itself with the database and ranks as a fresh copy; a copy that was up to date does not.
// Real PostgreSQL, real stores, each test on a database of its own.
import t, { type Test } from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import type { Logger } from '../../src/core/logger.js'
import { HashedEmbedder } from '../../src/memory/hashed-embedder.js'
import { withoutLabels } from '../../src/memory/posting-blocks.js'
import { ReplicatedMemoryStore } from '../../src/memory/replicated-memory-store.js'
import { PgMemoryLog } from '../../src/store/pg-memory-log.js'
import { entry } from '../contract/memory-store.contract.js'
import { tempDatabase } from '../helpers/pg.js'

const embedder = new HashedEmbedder()
const SESSION = '01900000-0000-7000-8000-0000000000bb'
const FORGOTTEN = /deletions this copy had not replayed were forgotten/

interface Line {
  level: string
  obj: object
  msg: string | undefined
}

/** A Logger that keeps what it is given, to assert on. */
function recorder(): Logger & { lines: Line[] } {
  const lines: Line[] = []
  const at =
    (level: string) =>
    (obj: object, msg?: string): void => {
      lines.push({ level, obj, msg })
    }
  const logger = { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), child: () => logger }
  return logger
}

interface Opened {
  store: ReplicatedMemoryStore
  log: PgMemoryLog
  logger: ReturnType<typeof recorder>
}

async function open(t: Test, url: string, dir: string, pollMs = 50): Promise<Opened> {
  const log = await PgMemoryLog.open({ url, poolSize: 3, replicaId: 'test', withoutLabels })
  const logger = recorder()
  const store = await ReplicatedMemoryStore.open({ dataDir: dir, embedder, log, logger, pollMs })
  t.teardown(() => store.close())
  return { store, log, logger }
}

async function tempDirs(t: Test, n: number): Promise<string[]> {
  const dirs = await Promise.all(Array.from({ length: n }, () => mkdtemp(join(tmpdir(), 'burrow-pgprune-'))))
  t.teardown(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))))
  return dirs
}

function sql(t: Test, url: string): pg.Pool {
  const p = new pg.Pool({ connectionString: url, max: 1 })
  p.on('error', () => undefined)
  t.teardown(() => p.end())
  return p
}

/** Polls `check` every 50 ms until it holds; fails the test after `within` ms. */
async function eventually(t: Test, what: string, check: () => Promise<boolean>, within = 10_000): Promise<void> {
  const t0 = Date.now()
  while (!(await check())) {
    if (Date.now() - t0 > within) {
      t.fail(`${what}: not within ${within} ms`)
      return
    }
    await new Promise((r) => setTimeout(r, 50))
  }
}

const rows = async (p: pg.Pool) =>
  (await p.query('SELECT tenant, seq FROM memory_deletions ORDER BY tenant, seq')).rows.map((r) => `${r.tenant}/${r.seq}`)
const pruned = async (p: pg.Pool) =>
  Object.fromEntries(
    (await p.query('SELECT tenant, pruned FROM memory_tenants ORDER BY tenant')).rows.map((r) => [r.tenant, Number(r.pruned)]),
  )
/** Makes the tenant's deletions up to `seq` look recorded eight days ago (past the seven days' retention). */
const age = (p: pg.Pool, tenant: string, seq: number) =>
  p.query(`UPDATE memory_deletions SET at = now() - interval '8 days' WHERE tenant = $1 AND seq <= $2`, [tenant, seq])

t.test(
  'pruning forgets only deletions past the retention, in batches, from any replica at once; a store prunes when it opens',
  async (t) => {
    const db = await tempDatabase(t, 'prune')
    const [dir] = await tempDirs(t, 1)
    const p = sql(t, db.url)
    const a = await open(t, db.url, dir!)
    // Two replicas' logs without stores: nothing prunes in the background under the counts asserted here
    // (A's store pruned once at its open, before any deletion).
    const [x, y] = await Promise.all([0, 1].map(() => PgMemoryLog.open({ url: db.url, poolSize: 2, replicaId: 'pruner', withoutLabels })))
    t.teardown(() => Promise.all([x!.close(), y!.close()]))
    const acme = await a.store.add(Array.from({ length: 6 }, (_, i) => entry(`acme note ${i} about the weir`)))
    const globex = await a.store.add([
      entry('globex note about the mill', { tenant: 'globex' }),
      entry('globex kite', { tenant: 'globex' }),
    ])
    for (const e of acme.slice(0, 4)) t.ok(await a.store.delete('acme', e.id))
    t.ok(await a.store.delete('globex', globex[0]!.id))
    t.same(await rows(p), ['acme/1', 'acme/2', 'acme/3', 'acme/4', 'globex/1'])

    t.equal(await x!.pruneDeletions(), 0, 'nothing is past the retention yet')
    await age(p, 'acme', 3)
    await age(p, 'globex', 1)
    t.equal(await x!.pruneDeletions(undefined, 2), 4, 'four deletions forgotten, two a batch')
    t.same(await rows(p), ['acme/4'], 'the recent deletion is kept')
    t.same(await pruned(p), { acme: 3, globex: 1 }, 'each tenant records the last deletion forgotten')
    t.equal(await x!.pruneDeletions(), 0, 'a second run forgets nothing more')

    // Two replicas pruning at once: each deletion goes once, neither fails.
    const more = await a.store.add(Array.from({ length: 30 }, (_, i) => entry(`acme extra ${i}`)))
    for (const e of more) t.ok(await a.store.delete('acme', e.id))
    await age(p, 'acme', 34)
    const [byX, byY] = await Promise.all([x!.pruneDeletions(undefined, 7), y!.pruneDeletions(undefined, 7)])
    t.equal(byX + byY, 31, `31 deletions forgotten once between the two (${byX} + ${byY})`)
    t.same(await rows(p), [])
    t.same(await pruned(p), { acme: 34, globex: 1 })

    // A store opening on a database with old deletions forgets them by itself.
    await a.store.delete('acme', acme[4]!.id)
    await age(p, 'acme', 35)
    t.same(await rows(p), ['acme/35'])
    const [dirC] = await tempDirs(t, 1)
    const c = await open(t, db.url, dirC!)
    await eventually(t, 'the store opening prunes', async () => (await rows(p)).length === 0)
    await eventually(t, 'and logs it', async () =>
      c.logger.lines.some((l) => l.level === 'info' && /forgot memory deletions/.test(l.msg ?? '')),
    )
    t.same(await pruned(p), { acme: 35, globex: 1 })
  },
)

const TOPICS = ['harbour', 'orchard', 'glacier', 'market', 'railway', 'library', 'vineyard', 'lighthouse']
const text = (i: number) =>
  `Note ${i}: the ${TOPICS[i % TOPICS.length]} survey found ${i % 3 === 0 ? 'cracked' : 'sound'} stonework near gate ${i % 5}.`
const QUERIES = ['cracked stonework harbour', 'glacier survey gate 2', 'sound stonework vineyard', 'Note 17', 'railway', 'Note 3']

const results = (s: ReplicatedMemoryStore) =>
  Promise.all(
    QUERIES.flatMap((q) =>
      (['hybrid', 'vector', 'keyword'] as const).map(async (mode) =>
        (await s.search({ tenant: 'acme', text: q, limit: 10, mode })).map((h) => [h.entry.id, h.score]),
      ),
    ),
  )

t.test(
  'a copy behind forgotten deletions compares itself with the database and ranks as a fresh copy; an up-to-date one does not',
  async (t) => {
    const db = await tempDatabase(t, 'prunecopy')
    const [dirA, dirB, dirD, dirF] = await tempDirs(t, 4)
    const p = sql(t, db.url)
    const a = await open(t, db.url, dirA!)
    // B runs but does not poll (an hour): it replays deletions only when a search finds its copy stale.
    const b = await open(t, db.url, dirB!, 3_600_000)
    let d = await open(t, db.url, dirD!)
    const added = (
      await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          a.store.add([entry(text(i), { session_id: i % 4 === 0 ? SESSION : null, seq: i }), entry(text(i + 100), { seq: i + 100 })]),
        ),
      )
    ).flat()
    const ids = new Set(added.map((e) => e.id))
    const hits = async (s: ReplicatedMemoryStore, q: string) =>
      (await s.search({ tenant: 'acme', text: q, limit: 30 })).map((h) => h.entry.id)
    // Every entry holds these words: a keyword search finds what the copy holds.
    const all = async (s: ReplicatedMemoryStore) =>
      new Set((await s.search({ tenant: 'acme', text: 'survey stonework gate note', limit: 50, mode: 'keyword' })).map((h) => h.entry.id))
    for (const s of [a, b, d]) await eventually(t, 'each copy has the entries', async () => (await all(s.store)).size === 24)
    const note3 = added.find((e) => e.content.startsWith('Note 3:'))!
    t.ok((await hits(b.store, 'Note 3')).includes(note3.id))
    // D stops with its copy; deletions on A, then past the retention and forgotten.
    await d.store.close()
    t.ok(await a.store.delete('acme', note3.id))
    const sessionGone = await a.store.deleteSession('acme', SESSION)
    t.equal(sessionGone, 3)
    const deleted = new Set([note3.id, ...added.filter((e) => e.session_id === SESSION).map((e) => e.id)])
    await age(p, 'acme', 100)
    t.equal(await a.log.pruneDeletions(), 4)
    t.same(await rows(p), [], 'none of the deletions B and D have not replayed is recorded any more')

    // B: its next search finds its copy stale, learns the deletions were forgotten, and drops what the database no longer has.
    await eventually(t, 'B no longer finds the deleted entry', async () => !(await hits(b.store, 'Note 3')).includes(note3.id), 15_000)
    t.ok(
      b.logger.lines.some((l) => l.level === 'warn' && FORGOTTEN.test(l.msg ?? '')),
      'B logged the comparison',
    )
    // D restarted on its data directory: the same at its first search.
    d = await open(t, db.url, dirD!)
    t.notOk((await hits(d.store, 'Note 3')).includes(note3.id), 'D no longer finds the deleted entry')
    t.ok(
      d.logger.lines.some((l) => l.level === 'warn' && FORGOTTEN.test(l.msg ?? '')),
      'D logged the comparison',
    )
    for (const s of [b, d]) {
      const found = await all(s.store)
      t.same(
        [...deleted].filter((id) => found.has(id)),
        [],
        'no deleted entry is found',
      )
      t.same(
        [...ids].filter((id) => !deleted.has(id) && !found.has(id)),
        [],
        'every other entry is found',
      )
    }

    // The same rankings as a fresh copy, in every mode, once every HNSW index holds every entry.
    const f = await open(t, db.url, dirF!)
    const copies = [a, b, d]
    await eventually(
      t,
      'the copies rank as a fresh copy',
      async () => {
        await results(f.store)
        if ([f, ...copies].some((c) => c.store.indexBacklog() > 0)) return false
        const fresh = JSON.stringify(await results(f.store))
        return (await Promise.all(copies.map((c) => results(c.store)))).every((r) => JSON.stringify(r) === fresh)
      },
      15_000,
    )
    t.equal(await b.store.count('acme'), 20)

    // A was up to date: the prune changed nothing for it, nor does a deletion after it, nor a restart.
    const later = added.find((e) => e.content.startsWith('Note 5:'))!
    t.ok(await a.store.delete('acme', later.id))
    await eventually(t, 'B follows a deletion after the prune', async () => !(await hits(b.store, 'Note 5')).includes(later.id), 15_000)
    t.notOk((await hits(a.store, 'Note 5')).includes(later.id))
    t.notOk(
      a.logger.lines.some((l) => FORGOTTEN.test(l.msg ?? '')),
      'A never compared its copy',
    )
    const bComparisons = b.logger.lines.filter((l) => FORGOTTEN.test(l.msg ?? '')).length
    t.equal(bComparisons, 1, 'B compared once, and followed the later deletion by replaying it')
    await a.store.close()
    const a2 = await open(t, db.url, dirA!)
    t.notOk((await hits(a2.store, 'Note 5')).includes(later.id))
    t.notOk(
      a2.logger.lines.some((l) => FORGOTTEN.test(l.msg ?? '') || /not made from this database/.test(l.msg ?? '')),
      'A restarted keeps its copy as it is',
    )
  },
)
