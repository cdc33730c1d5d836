/**
 * memory-recall: does hybrid retrieval beat each signal alone, per query type, per embedder?
 *
 * Generated long-dialogue corpora (bench/lib/dialogue-corpus.ts; six seeds by default, BENCH_RECALL_SEEDS
 * to choose, each in its own store, the queries pooled), each: ~110 dated sessions
 * between 14 named speakers, ~2,400 entries (every turn, every session header, pasted outputs
 * split into passages), and five query types — single-turn paraphrase, two-turn, temporal,
 * speaker-attributed, identifier — split into a tuning half and a held-out half.
 * For each embedder (the offline `hashed` one, and `use-lite` when its optional packages are
 * installed) every entry goes into a real `HnswMemoryStore`, and every query runs in `mode`
 * vector and keyword (their top-CANDIDATES lists, the fusion's input) and hybrid (limit 10).
 *  - Tuning half: a grid over the fusion's normalisations and weights, applied with the real
 *    `rank()` to the same candidate lists and exact-match sets; printed, never used to report.
 *  - Held-out half: recall@5, recall@10 (a gold passage in the top k) and MRR@10 per mode,
 *    per query type, per embedder; hybrid is the store's own result with the frozen weights.
 * Targets (default embedder, held-out): hybrid recall@5 ≥ max(vector, keyword) recall@5 for
 * every query type.
 *
 * BENCH_RECALL_STORE=postgres runs the same evaluation against memory on PostgreSQL (a
 * `ReplicatedMemoryStore` over a fresh database per corpus on BURROW_TEST_PG_URL, default the local
 * server; dropped after): with BENCH_RECALL_DUMP from both runs, the result lists compare one to one.
 *
 *   npx tsx bench/memory-recall.bench.ts      (or: npx tsx bench/run.ts memory-recall)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Embedder, MemoryQuery, NewMemoryEntry } from '../src/core/memory-store.js'
import type { FusionWeights, Normalisation, Ranked } from '../src/memory/memory-ranking.js'
import { appImport } from './lib/app.js'
import { DIALOGUE_SEED, DIALOGUE_TYPES, dialogueCorpus, type DialogueCorpus, type DialogueQuery } from './lib/dialogue-corpus.js'
import { isMain, metric, percentile, target, type BenchResult, type Metric } from './lib/types.js'

const { HashedEmbedder } = await appImport<typeof import('../src/memory/hashed-embedder.js')>('memory/hashed-embedder.js')
const { UseLiteEmbedder } = await appImport<typeof import('../src/memory/use-lite-embedder.js')>('memory/use-lite-embedder.js')
const { CANDIDATES, exactMatches, fusionFor, rank } =
  await appImport<typeof import('../src/memory/memory-ranking.js')>('memory/memory-ranking.js')
const { HnswMemoryStore } = await appImport<typeof import('../src/memory/hnsw-memory-store.js')>('memory/hnsw-memory-store.js')
const { ReplicatedMemoryStore } =
  await appImport<typeof import('../src/memory/replicated-memory-store.js')>('memory/replicated-memory-store.js')
const { PgMemoryLog } = await appImport<typeof import('../src/store/pg-memory-log.js')>('store/pg-memory-log.js')
const { withoutLabels } = await appImport<typeof import('../src/memory/posting-blocks.js')>('memory/posting-blocks.js')
const { tokenize } = await appImport<typeof import('../src/memory/text-features.js')>('memory/text-features.js')
const { termFrequencies } = await appImport<typeof import('../src/memory/bm25.js')>('memory/bm25.js')
const { loadConfig } = await appImport<typeof import('../src/app/config.js')>('app/config.js')

type Mode = NonNullable<MemoryQuery['mode']>
const MODES: Mode[] = ['vector', 'keyword', 'hybrid']
const TENANT = 'bench'
const pct = (x: number) => x * 100

interface Lists {
  vector: Ranked[][]
  keyword: Ranked[][]
  hybrid: Ranked[][]
  ms: Record<Mode, number[]>
}
interface EmbedderRun {
  name: string
  id: string
  lists: Lists
  ingestPerS: number
  loadMs: number
  rssMb: number
}

/** Recall@k (share of queries with a gold label in the top k) and MRR@10 over `idx`. */
function scores(lists: readonly Ranked[][], qs: readonly DialogueQuery[], idx: readonly number[]) {
  let r5 = 0,
    r10 = 0,
    mrr = 0
  for (const i of idx) {
    const gold = new Set(qs[i]!.gold)
    const at = lists[i]!.slice(0, 10).findIndex((h) => gold.has(h.label)) + 1
    if (at > 0 && at <= 5) r5++
    if (at > 0) {
      r10++
      mrr += 1 / at
    }
  }
  const n = idx.length || 1
  return { r5: r5 / n, r10: r10 / n, mrr: mrr / n }
}

/**
 * Every corpus into its own fresh store (labels are a corpus's passage indices), every query of
 * it in each mode; the lists of all corpora concatenated in corpus order, as the queries are.
 */
async function runEmbedder(
  name: string,
  open: () => Promise<Embedder & { close?: () => Promise<void> }>,
  corpora: readonly DialogueCorpus[],
): Promise<EmbedderRun> {
  const rss0 = process.memoryUsage().rss
  const l0 = performance.now()
  const embedder = await open()
  const loadMs = performance.now() - l0
  const lists: Lists = { vector: [], keyword: [], hybrid: [], ms: { vector: [], keyword: [], hybrid: [] } }
  let added = 0
  let addMs = 0
  try {
    for (const { passages, queries: qs } of corpora) {
      const dir = mkdtempSync(join(tmpdir(), 'burrow-bench-memory-recall-'))
      try {
        const store = await openStore(dir, embedder)
        const entries: NewMemoryEntry[] = passages.map((content, i) => ({ tenant: TENANT, content, session_id: null, turn: null, seq: i }))
        const a0 = performance.now()
        for (let i = 0; i < entries.length; i += 250) await store.add(entries.slice(i, i + 250))
        // Until every entry is embedded and in the HNSW index (use-lite embeds in the background, after the add answered).
        while (store.indexBacklog() > 0) await new Promise((r) => setTimeout(r, 20))
        addMs += performance.now() - a0
        added += entries.length
        for (const mode of MODES) {
          for (const q of qs) {
            const t0 = performance.now()
            const hits = await store.search({ tenant: TENANT, text: q.text, limit: mode === 'hybrid' ? 10 : CANDIDATES, mode })
            lists.ms[mode].push(performance.now() - t0)
            lists[mode].push(hits.map((h) => ({ label: h.entry.seq!, score: h.score })))
          }
        }
        await store.close()
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
      console.log(
        `  ${name}: ${passages.length.toLocaleString('en-US')} entries added and ${qs.length} queries × ${MODES.length} modes searched`,
      )
    }
  } finally {
    await embedder.close?.()
  }
  return { name, id: embedder.id, lists, ingestPerS: added / (addMs / 1000), loadMs, rssMb: (process.memoryUsage().rss - rss0) / 1e6 }
}

/** The store under test: embedded (default), or on PostgreSQL with BENCH_RECALL_STORE=postgres (its database dropped at close). */
async function openStore(dir: string, embedder: Embedder) {
  if (process.env.BENCH_RECALL_STORE !== 'postgres') return HnswMemoryStore.open({ dataDir: dir, embedder, durability: 'relaxed' })
  const { tempDatabase } = await import('../test/helpers/pg.js')
  const db = await tempDatabase(undefined, 'recall')
  const log = await PgMemoryLog.open({ url: db.url, poolSize: 4, replicaId: 'bench', withoutLabels })
  const store = await ReplicatedMemoryStore.open({ dataDir: dir, embedder, log })
  const close = store.close.bind(store)
  store.close = async () => {
    await close()
    await db.drop()
  }
  return store
}

/** The passages holding every identifier the query names, from postings built here with the service's tokenizer. */
function exactSets(passages: string[], qs: DialogueQuery[]): Array<Set<number> | undefined> {
  const postings = new Map<string, Array<{ label: number; tf: number }>>()
  passages.forEach((p, label) => {
    for (const [term, tf] of termFrequencies(tokenize(p))) {
      let l = postings.get(term)
      if (!l) postings.set(term, (l = []))
      l.push({ label, tf })
    }
  })
  const source = {
    stats: () => ({ docs: passages.length, totalLength: 0 }),
    postings: (t: string) => postings.get(t) ?? [],
    length: () => 0,
  }
  return qs.map((q) => exactMatches(source, q.text))
}

/** The grid's fusion families: each normalisation, and reciprocal rank at several constants. */
const FAMILIES: Array<Pick<FusionWeights, 'normalisation' | 'rankConstant'>> = [
  ...(['minmax', 'max', 'dbsf', 'absolute'] as Normalisation[]).map((normalisation) => ({ normalisation })),
  ...[1, 5, 10, 20, 60].map((rankConstant) => ({ normalisation: 'rank' as const, rankConstant })),
]
const familyName = (f: Pick<FusionWeights, 'normalisation' | 'rankConstant'>) =>
  f.normalisation === 'rank' ? `rank c=${f.rankConstant ?? 1}` : f.normalisation

const rrf = (v: readonly Ranked[], k: readonly Ranked[]): Ranked[] => {
  const s = new Map<number, number>()
  for (const list of [v, k]) list.forEach((h, i) => s.set(h.label, (s.get(h.label) ?? 0) + 1 / (60 + i + 1)))
  return [...s].map(([label, score]) => ({ label, score })).sort((a, b) => b.score - a.score || a.label - b.label)
}

export async function run(): Promise<BenchResult> {
  const t0 = performance.now()
  // Several corpora (seeds), pooled: with ~30 held-out queries per type one corpus decides a type by one
  // query; six give ~190 per type and half, where three (~96) still left the grid's choice to a query or two.
  const seeds = (process.env.BENCH_RECALL_SEEDS ?? [0, 1, 2, 3, 4, 5].map((i) => DIALOGUE_SEED + i).join(',')).split(',').map(Number)
  const corpora = seeds.map((seed) => dialogueCorpus({ seed }))
  const corpus = corpora[0]!
  const qs = corpora.flatMap((c) => c.queries)
  const exact = corpora.flatMap((c) => exactSets(c.passages, c.queries))
  const passages = corpora.flatMap((c) => c.passages)
  const half = (h: DialogueQuery['half'], type?: string) =>
    qs.map((q, i) => (q.half === h && (!type || q.type === type) ? i : -1)).filter((i) => i >= 0)
  const defaultEmbedder = loadConfig({}).embedder

  const runs: EmbedderRun[] = [await runEmbedder('hashed', async () => new HashedEmbedder(), corpora)]
  let liteSkipped = ''
  try {
    if (process.env.BENCH_RECALL_USE_LITE === '0') throw new Error('BENCH_RECALL_USE_LITE=0')
    runs.push(await runEmbedder('use-lite', () => UseLiteEmbedder.open(), corpora))
  } catch (err) {
    liteSkipped = (err as Error).message
  }

  // The candidate lists, for trying other fusions offline (BENCH_RECALL_DUMP=file.json).
  if (process.env.BENCH_RECALL_DUMP)
    writeFileSync(
      process.env.BENCH_RECALL_DUMP,
      JSON.stringify({
        qs,
        exact: exact.map((e) => (e ? [...e] : null)),
        runs: runs.map((r) => ({ name: r.name, id: r.id, lists: r.lists })),
      }),
    )
  // -- the grid, on the tuning half only.
  const grid: string[] = []
  const bestOf = new Map<string, { w: FusionWeights; sat: number; mean: number }>()
  for (const r of runs) {
    let best: { w: FusionWeights; sat: number; mean: number } | undefined
    for (const family of FAMILIES) {
      const row: string[] = []
      for (let k = 0; k <= 20; k++) {
        const w: FusionWeights = { vector: (20 - k) / 20, keyword: k / 20, ...family }
        const fused = qs.map((_, i) => rank('hybrid', r.lists.vector[i]!, r.lists.keyword[i]!, 10, exact[i], w))
        let sat = 0,
          mean = 0
        for (const type of DIALOGUE_TYPES) {
          const idx = half('tune', type)
          const h = scores(fused, qs, idx).r5
          if (h >= Math.max(scores(r.lists.vector, qs, idx).r5, scores(r.lists.keyword, qs, idx).r5)) sat++
          mean += h / DIALOGUE_TYPES.length
        }
        row.push(`${(k / 20).toFixed(2)}:${pct(mean).toFixed(1)}${sat === DIALOGUE_TYPES.length ? '✓' : `(${sat})`}`)
        // Every type at least as good as its best single signal first, then the mean recall@5.
        if (!best || sat > best.sat || (sat === best.sat && mean > best.mean + 1e-9)) best = { w, sat, mean }
      }
      grid.push(
        `${r.name}, ${familyName(family)} (keyword weight: mean recall@5 over types, ✓ = no type below its best single signal, (n) = n types not below): ${row.join(' ')}`,
      )
    }
    bestOf.set(r.name, best!)
    console.log(grid.slice(-3).join('\n'))
    console.log(`${r.name}: best on the tuning half ${JSON.stringify(best)}`)
  }

  // -- the held-out half: what the report is about.
  const metrics: Metric[] = []
  const targets = []
  const table: string[] = [
    '| embedder | query type (held-out n) | vector @5 / @10 | keyword @5 / @10 | hybrid @5 / @10 | hybrid MRR@10 | old RRF hybrid @5 |',
    '|---|---|---|---|---|---|---|',
  ]
  for (const r of runs) {
    const old = qs.map((_, i) => rrf(r.lists.vector[i]!, r.lists.keyword[i]!))
    for (const type of [...DIALOGUE_TYPES, 'all']) {
      const idx = type === 'all' ? half('held-out') : half('held-out', type)
      const s = Object.fromEntries(MODES.map((m) => [m, scores(r.lists[m], qs, idx)])) as Record<Mode, ReturnType<typeof scores>>
      const best = Math.max(s.vector.r5, s.keyword.r5)
      const f = (x: { r5: number; r10: number }) => `${pct(x.r5).toFixed(1)} / ${pct(x.r10).toFixed(1)}`
      table.push(
        `| ${r.name} | ${type} (${idx.length}) | ${f(s.vector)} | ${f(s.keyword)} | ${f(s.hybrid)} | ${s.hybrid.mrr.toFixed(3)} | ${pct(scores(old, qs, idx).r5).toFixed(1)} |`,
      )
      for (const m of MODES)
        metrics.push(metric(`${r.name}, ${type}: recall@5, ${m}`, pct(s[m].r5), '%', m === 'hybrid' ? pct(best) : undefined))
      if (type === 'all') for (const m of MODES) metrics.push(metric(`${r.name}, all: recall@10, ${m}`, pct(s[m].r10), '%'))
      if (type !== 'all' && r.name === defaultEmbedder)
        targets.push(
          target(`${r.name}, ${type}: hybrid − max(vector, keyword) recall@5, held-out`, pct(s.hybrid.r5 - best), '>=', 0, 'points'),
        )
    }
    for (const m of MODES)
      metrics.push(
        metric(
          `${r.name}: search latency p50, ${m}`,
          percentile(
            [...r.lists.ms[m]].sort((a, b) => a - b),
            50,
          ),
          'ms',
        ),
      )
    metrics.push(
      metric(`${r.name}: add() in batches of 250 until every passage is embedded and in the HNSW index`, r.ingestPerS, 'passages/s'),
    )
    metrics.push(metric(`${r.name}: embedder start-up`, r.loadMs, 'ms'))
    metrics.push(metric(`${r.name}: process RSS growth over the run`, r.rssMb, 'MB'))
  }
  // The store's hybrid must be rank() with the frozen weights on the same candidates (the grid's premise).
  // (They can differ where HNSW's answer depends on its search breadth: a vector-only query searches at
  // efSearch, a hybrid query's vector side at efHybrid.)
  const differ = runs.map(
    (r) =>
      `${r.name} ${
        qs.filter(
          (_, i) =>
            rank('hybrid', r.lists.vector[i]!, r.lists.keyword[i]!, 10, exact[i], fusionFor(r.id))
              .map((h) => h.label)
              .join() !== r.lists.hybrid[i]!.map((h) => h.label).join(),
        ).length
      }`,
  )

  return {
    name: 'memory-recall',
    title: 'Memory recall on long dialogues: vector vs. keyword vs. hybrid, per query type and embedder (held-out half)',
    description: `${corpora.length} generated corpora (\`bench/lib/dialogue-corpus.ts\`, one per seed, each in its own store, results pooled); the first: ${corpus.stats.sessions} dated sessions between ${corpus.stats.speakers} named speakers, ${corpus.passages.length.toLocaleString('en-US')} entries (${corpus.stats.turns} turns, each \`[date] Speaker: text\`, session headers, and ${corpus.stats.pastes} pasted outputs split with \`splitPassages\`), mostly small talk and near misses on the same topics (${passages.length.toLocaleString('en-US')} entries in all). ${qs.length} queries in all, phrased as a person asks them, five types: **single-turn** (a fact said once, asked in other words), **two-turn** (a question and its answer; either turn is gold), **temporal** ("when did…", the turn saying it happened), **speaker** ("what did Omar say about…", several people discuss the same thing), **identifier** (ticket, invoice, host, version, commit or path on one line of a long paste). Queries alternate per type into a tuning half (the fusion grid) and a held-out half (everything reported). Each embedder's entries go into a real \`HnswMemoryStore\`; every query runs in mode vector and keyword (top ${CANDIDATES}) and hybrid (top 10). Recall@k: share of queries with a gold entry in the top k; MRR over the top 10. "Old RRF" is the previous fusion (equal-weight reciprocal rank, k = 60) on the same candidates, without its exact-first rule.`,
    config: {
      entries: passages.length,
      'queries tuning / held-out': `${half('tune').length} / ${half('held-out').length}`,
      embedders: runs.map((r) => r.id).join(', ') + (liteSkipped ? ` (use-lite skipped: ${liteSkipped})` : ''),
      'default embedder (BURROW_EMBEDDER unset)': defaultEmbedder,
      fusion: runs
        .map((r) => {
          const f = fusionFor(r.id)
          return `${r.name}: ${familyName(f)}, vector ${f.vector}, keyword ${f.keyword}`
        })
        .join('; '),
      'corpus seeds': seeds.join(', '),
    },
    metrics,
    targets,
    pass: targets.every((t) => t.pass),
    notes: [
      `Held-out recall (%), per query type and embedder:\n\n${table.join('\n')}\n`,
      `Best fusion on the tuning half per embedder: ${runs.map((r) => `${r.name} ${JSON.stringify(bestOf.get(r.name))}`).join('; ')}. The frozen weights (\`FUSION_BY_EMBEDDER\`): ${runs.map((r) => `${r.name} ${JSON.stringify(fusionFor(r.id))}`).join('; ')}.`,
      `Queries whose store hybrid result differs from \`rank()\` with \`fusionFor(embedder)\` applied to the vector and keyword candidate lists and the exact-match sets computed here (the grid's premise; HNSW's breadth differs between a vector query and a hybrid query's vector side): ${differ.join(', ')} of ${qs.length}.`,
      `Grid (tuning half): ${grid.join(' — ')}`,
    ],
    date: new Date().toISOString(),
    durationSeconds: (performance.now() - t0) / 1000,
  }
}

if (isMain(import.meta.url)) {
  const r = await run()
  console.log(JSON.stringify({ ...r, notes: undefined }, null, 2))
  for (const n of r.notes) console.log(n)
}
