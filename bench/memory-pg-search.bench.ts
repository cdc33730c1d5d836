/**
 * memory-pg-search: memory search over the API on the PostgreSQL build against the embedded build
 * (issue 16: ≥ 0.5× at 20,000 entries).
 *
 * Two real Burrow servers (child processes, hashed embedder, no session store): one with
 * `BURROW_MEMORY_STORE=hnsw`, one with `BURROW_MEMORY_STORE=postgres` on a fresh database (the
 * local server, or BURROW_TEST_PG_URL; dropped after). Each is filled through `POST /v1/memory` in batches
 * of 1,000 with the same N short chat-like messages (`shortTexts`, seeded), waits until its HNSW
 * index holds every entry, then `GET /v1/memory/search?q=…&limit=10` runs under autocannon on one
 * and then the other, alternating, two rounds each. Queries are 3–5 words of held-out messages.
 *
 *   npx tsx bench/memory-pg-search.bench.ts      (or: npx tsx bench/run.ts memory-pg-search)
 */
import { startServer, type ServerChild } from './lib/child.js'
import { burrowEnv } from './lib/env.js'
import { meanLoad, runLoad, type Load } from './lib/load.js'
import { shortTexts } from './lib/memory-corpus.js'
import { searchQueries } from './lib/search-queries.js'
import { isMain, metric, sleep, target, type BenchResult } from './lib/types.js'
import { tempDatabase } from '../test/helpers/pg.js'

const N = Number(process.env.BENCH_SEARCH_ENTRIES ?? 20_000)
const BATCH = 1_000
const CONNECTIONS = 8
const DURATION = Number(process.env.BENCH_SEARCH_SECONDS ?? 8)
const HEADERS = { 'content-type': 'application/json' }

async function fill(server: ServerChild, texts: readonly string[]): Promise<number> {
  const t0 = performance.now()
  for (let i = 0; i < texts.length; i += BATCH) {
    const body = JSON.stringify(texts.slice(i, i + BATCH).map((content) => ({ content })))
    const res = await fetch(`${server.url}/v1/memory`, { method: 'POST', headers: HEADERS, body })
    if (res.status !== 201) throw new Error(`POST /v1/memory → ${res.status} ${await res.text()}`)
    await res.arrayBuffer()
  }
  const s = (performance.now() - t0) / 1000
  for (;;) {
    const m = /^burrow_memory_index_backlog (\d+)$/m.exec(await (await fetch(`${server.url}/metrics`)).text())
    if (m && Number(m[1]) === 0) return texts.length / s
    await sleep(50)
  }
}

const searchPath = (q: string) => `/v1/memory/search?q=${encodeURIComponent(q)}&limit=10`

async function load(server: ServerChild, queries: readonly string[]): Promise<Load> {
  for (const q of queries.slice(0, 50)) {
    const res = await fetch(server.url + searchPath(q))
    if (res.status !== 200) throw new Error(`GET /v1/memory/search → ${res.status} ${await res.text()}`)
    await res.arrayBuffer()
  }
  return runLoad(server, {
    url: server.url,
    connections: CONNECTIONS,
    duration: DURATION,
    requests: queries.map((q) => ({ method: 'GET' as const, path: searchPath(q) })),
  })
}

export async function run(): Promise<BenchResult> {
  const t0 = performance.now()
  const texts = shortTexts(N, 7)
  const queries = searchQueries(500)
  const db = await tempDatabase(undefined, 'pgsearch')
  const url = db.url
  const common = { BURROW_SESSION_STORE: 'off', BURROW_DURABILITY: 'relaxed', BURROW_EMBEDDER: 'hashed' }
  const embedded = await startServer('burrow', burrowEnv({ ...common, BURROW_MEMORY_STORE: 'hnsw' }))
  let shared: ServerChild | undefined
  try {
    shared = await startServer('burrow', burrowEnv({ ...common, BURROW_MEMORY_STORE: 'postgres', BURROW_DATABASE_URL: url }))
    const ingest = { embedded: await fill(embedded, texts), postgres: await fill(shared, texts) }
    const rounds: Record<'embedded' | 'postgres', Load[]> = { embedded: [], postgres: [] }
    for (let round = 0; round < 2; round++) {
      rounds.embedded.push(await load(embedded, queries))
      rounds.postgres.push(await load(shared, queries))
    }
    const e = meanLoad(rounds.embedded)
    const p = meanLoad(rounds.postgres)
    const ratio = p.reqPerSec / e.reqPerSec
    return {
      name: 'memory-pg-search',
      title: `Memory search over the API at ${N.toLocaleString('en-US')} entries: PostgreSQL build vs embedded build`,
      description:
        'Two real servers, `BURROW_MEMORY_STORE=hnsw` and `BURROW_MEMORY_STORE=postgres` (a fresh database), filled with the same short messages through `POST /v1/memory` (batches of 1,000) until their HNSW indexes hold every entry; then `GET /v1/memory/search?limit=10` under autocannon on one and then the other, alternating, two rounds each.',
      config: {
        entries: N,
        queries: queries.length,
        connections: CONNECTIONS,
        'seconds per round': DURATION,
        rounds: 2,
        embedder: 'hashed',
        capabilities: 'BURROW_SESSION_STORE=off, BURROW_MEMORY_STORE=hnsw | postgres, BURROW_COMPACTION=off',
      },
      metrics: [
        metric('embedded: searches/s', e.reqPerSec, 'req/s'),
        metric('postgres: searches/s', p.reqPerSec, 'req/s', e.reqPerSec),
        metric('embedded: p99', e.p99, 'ms'),
        metric('postgres: p99', p.p99, 'ms', e.p99),
        metric('embedded: server CPU per search', (e.serverCpu / e.reqPerSec) * 1000, 'ms'),
        metric('postgres: server CPU per search', (p.serverCpu / p.reqPerSec) * 1000, 'ms'),
        metric('embedded: ingest', ingest.embedded, 'entries/s'),
        metric('postgres: ingest', ingest.postgres, 'entries/s', ingest.embedded),
        metric('non-2xx responses', e.non2xx + p.non2xx, 'responses'),
      ],
      targets: [target('postgres searches/s over embedded', ratio, '>=', 0.5, '×')],
      pass: ratio >= 0.5 && e.non2xx + p.non2xx === 0,
      notes: [
        'Both builds search a local HNSW index and keyword statistics with the same code (MemoryCore); the PostgreSQL build adds no database round trip to a search while its poll (every 200 ms) keeps the tenant confirmed.',
      ],
      date: new Date().toISOString(),
      durationSeconds: (performance.now() - t0) / 1000,
    }
  } finally {
    await embedded.stop()
    await shared?.stop()
    await db.drop()
  }
}

if (isMain(import.meta.url)) {
  const r = await run()
  console.log(JSON.stringify(r, null, 2))
}
