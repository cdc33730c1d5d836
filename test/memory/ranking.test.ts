import t from 'tap'
import { exactTerms, identifierLike } from '../../src/memory/text-features.js'
import {
  FUSION,
  FUSION_BY_EMBEDDER,
  fuseScores,
  normaliser,
  rank,
  type FusionWeights,
  type Ranked,
} from '../../src/memory/memory-ranking.js'

t.test('exactTerms: only identifier-like tokens, never capitalised words', async (t) => {
  t.same(exactTerms('what changed in 2.13.13?'), ['2.13.13'])
  t.same(exactTerms('status of SUP-48213'), ['sup-48213'])
  t.same(exactTerms('who wrote 124de94?'), ['124de94'])
  t.same(exactTerms('has INV-2024-0042 been paid?'), ['inv-2024-0042'])
  t.same(exactTerms('what is new in v2.3.1'), ['v2.3.1'])
  t.same(exactTerms('commit a1b2c3d broke it'), ['a1b2c3d'])
  t.same(exactTerms('who edited /etc/hosts'), ['/etc/hosts'])
  t.same(exactTerms('mail ops@example.com about db-replica-07.eu-west.internal').sort(), [
    'db-replica-07.eu-west.internal',
    'ops@example.com',
  ])
  t.same(exactTerms('why is user_id null'), ['user_id'])
  t.same(exactTerms('what did Maria say about the Porto offsite?'), [], 'speaker and place names are not exact terms')
  t.same(exactTerms('What is Helga Castellanos working on?'), [])
  t.same(exactTerms('the follow-up with Jean-Luc in 2024, e.g. on the 3rd'), [], 'hyphenated words, years and abbreviations are words')
  t.same(exactTerms('the meeting moved to next week'), [])
})

t.test('identifierLike: the shapes, case by case', async (t) => {
  for (const id of ['INV-2024-0042', 'v2.3.1', 'a1b2c3d', '/etc/hosts', '~/notes', '#4521', 'node.js', 'snake_case', 'SUP-X', '12345'])
    t.ok(identifierLike(id), id)
  for (const w of ['Maria', 'Porto', 'follow-up', 'e.g', '2024', 'OpenAI', 'x1']) t.notOk(identifierLike(w), w)
})

t.test('normalisation maps each list to 0..1', async (t) => {
  const list: Ranked[] = [
    { label: 1, score: 0.75 },
    { label: 2, score: 0.5 },
    { label: 3, score: 0.25 },
  ]
  const mm = normaliser(list, 'minmax')
  t.same([mm(0.75), mm(0.5), mm(0.25)], [1, 0.5, 0])
  const mx = normaliser(list, 'max')
  t.same([mx(0.75), mx(0.375)], [1, 0.5])
  const db = normaliser(list, 'dbsf')
  t.ok(db(0.75) > db(0.5) && db(0.5) > db(0.25) && db(0.25) >= 0 && db(0.75) <= 1)
  t.equal(db(0.5), 0.5, 'the mean maps to the middle')
  t.equal(normaliser([{ label: 1, score: 3 }], 'minmax')(3), 1, 'a single candidate is the best one')
  t.equal(normaliser(list, 'absolute', 'vector')(0.25), 0.25, 'absolute: a cosine as it is')
  t.equal(
    normaliser(
      [
        { label: 1, score: 8 },
        { label: 2, score: 2 },
      ],
      'absolute',
      'keyword',
    )(2),
    0.25,
    'absolute: BM25 over the best',
  )
})

t.test('weighted fusion: weights decide between the signals, scores in 0..1, ties by label', async (t) => {
  const vector: Ranked[] = [
    { label: 1, score: 0.9 },
    { label: 2, score: 0.5 },
    { label: 3, score: 0.1 },
  ]
  const keyword: Ranked[] = [
    { label: 3, score: 12 },
    { label: 2, score: 6 },
    { label: 4, score: 0 },
  ]
  const vecHeavy = fuseScores(vector, keyword, { vector: 0.8, keyword: 0.2, normalisation: 'minmax' })
  const kwHeavy = fuseScores(vector, keyword, { vector: 0.2, keyword: 0.8, normalisation: 'minmax' })
  t.equal(vecHeavy[0]!.label, 1)
  t.equal(kwHeavy[0]!.label, 3)
  t.same(vecHeavy.map((r) => r.label).sort(), [1, 2, 3, 4], 'every candidate of either list')
  t.ok([...vecHeavy, ...kwHeavy].every((r) => r.score >= 0 && r.score <= 1))
  t.equal(
    fuseScores([{ label: 5, score: 0.7 }], [{ label: 5, score: 3 }], { vector: 1, keyword: 1, normalisation: 'minmax' })[0]!.score,
    1,
    'first in both lists scores 1 (relative)',
  )
  t.equal(
    fuseScores([{ label: 5, score: 0.7 }], [{ label: 5, score: 3 }], { vector: 1, keyword: 1, normalisation: 'absolute' })[0]!.score,
    0.85,
    'absolute: the cosine as it is, BM25 over its best',
  )
  const tie = fuseScores(
    [
      { label: 9, score: 1 },
      { label: 4, score: 0 },
    ],
    [
      { label: 4, score: 1 },
      { label: 9, score: 0 },
    ],
    { vector: 1, keyword: 1, normalisation: 'minmax' },
  )
  t.same(
    tie.map((r) => r.label),
    [4, 9],
    'equal scores: lower label first',
  )
  t.ok(FUSION.vector >= 0 && FUSION.keyword >= 0 && FUSION.vector + FUSION.keyword > 0)
})

t.test('rank normalisation: (c + 1) / (c + rank), weighted, whatever the scores', async (t) => {
  const w = { vector: 0.5, keyword: 0.5, normalisation: 'rank' as const, rankConstant: 1 }
  const fused = fuseScores(
    [
      { label: 1, score: 0.9 },
      { label: 2, score: 0.1 },
    ],
    [
      { label: 2, score: 40 },
      { label: 3, score: 39 },
    ],
    w,
  )
  // 1: 0.5·1; 2: 0.5·(2/3) + 0.5·1; 3: 0.5·(2/3).
  t.same(
    fused.map((r) => [r.label, Number(r.score.toFixed(6))]),
    [
      [2, Number((5 / 6).toFixed(6))],
      [1, 0.5],
      [3, Number((1 / 3).toFixed(6))],
    ],
  )
  const flat = fuseScores(
    [
      { label: 1, score: 0.9 },
      { label: 2, score: 0.1 },
    ],
    [],
    { ...w, rankConstant: 60 },
  )
  t.ok(flat[0]!.score - flat[1]!.score < 0.01, 'a large constant flattens the ranks (RRF with 60)')
})

t.test('the default fusion does not bury a passage only the keywords find under unrelated vector hits', async (t) => {
  // A new fact on a new topic: BM25 finds it alone; the nearest vectors are unrelated (cosine ~0.1),
  // and HNSW, which misses such outliers now and then, did not return it.
  const vector: Ranked[] = [
    { label: 192, score: 0.13 },
    { label: 2038, score: 0.11 },
    { label: 3842, score: 0.1 },
  ]
  const keyword: Ranked[] = [{ label: 4000, score: 9.2 }]
  t.same(
    rank('hybrid', vector, keyword, 3, undefined, FUSION_BY_EMBEDDER.hashed).map((r) => r.label),
    [4000, 192, 2038],
  )
  t.equal(
    rank('hybrid', vector, keyword, 3, undefined, { ...FUSION_BY_EMBEDDER.hashed, vector: 0.5, keyword: 0.5 })[0]!.label,
    192,
    "at equal weights it would only tie with the vector side's first (and lose on the label)",
  )
  t.not(
    rank('hybrid', vector, keyword, 3, undefined, { vector: 0.75, keyword: 0.25, normalisation: 'minmax' })[0]!.label,
    4000,
    'as relative vector scores did',
  )
  // A passage both signals put near the top beats one that only one of them puts first.
  const both = rank(
    'hybrid',
    [
      { label: 1, score: 0.8 },
      { label: 2, score: 0.7 },
    ],
    [
      { label: 3, score: 10 },
      { label: 2, score: 9 },
    ],
    3,
    undefined,
    FUSION_BY_EMBEDDER.hashed,
  )
  t.equal(both[0]!.label, 2)
})

t.test('hybrid ranking puts exact matches first, keeping scores ordered', async (t) => {
  const vector = [
    { label: 1, score: 0.9 },
    { label: 2, score: 0.8 },
    { label: 3, score: 0.7 },
  ]
  const keyword = [
    { label: 3, score: 9 },
    { label: 4, score: 5 },
    { label: 1, score: 1 },
  ]
  const r = rank('hybrid', vector, keyword, 4, new Set([3, 4]))
  t.same(
    r
      .slice(0, 2)
      .map((x) => x.label)
      .sort(),
    [3, 4],
    'exact matches first',
  )
  t.ok(r.slice(0, 2).every((x) => x.score > 0.5) && r.slice(2).every((x) => x.score <= 0.5))
  for (let i = 1; i < r.length; i++) t.ok(r[i - 1]!.score >= r[i]!.score)
  t.ok(r.every((x) => x.score >= 0 && x.score <= 1))
  t.same(rank('hybrid', vector, keyword, 4), fuseScores(vector, keyword).slice(0, 4), 'without exact matches: the fusion')
  t.same(
    rank('keyword', vector, keyword, 2).map((x) => x.score),
    [1, 5 / 9],
  )
  t.same(rank('vector', vector, keyword, 1), [{ label: 1, score: 0.9 }])
})

t.test('hybrid ranking keeps only the best `limit` of each group: the same as partitioning the whole sorted fusion', async (t) => {
  // The definition: fuse every candidate, sort, exact matches first (in fused order), then the rest.
  const reference = (vector: Ranked[], keyword: Ranked[], limit: number, exact: Set<number>, w: FusionWeights): Ranked[] => {
    const all = fuseScores(vector, keyword, w)
    if (exact.size === 0) return all.slice(0, limit)
    const first = all.filter((r) => exact.has(r.label)).map((r) => ({ label: r.label, score: 0.5 + Math.max(r.score, 1e-9) / 2 }))
    const rest = all.filter((r) => !exact.has(r.label)).map((r) => ({ label: r.label, score: r.score / 2 }))
    return [...first, ...rest].slice(0, limit)
  }
  let seed = 7
  const rnd = (n: number) => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
    return seed % n
  }
  // Few distinct labels and scores: labels in both lists, ties on fused score (broken by label) are common.
  const list = (n: number) => {
    const labels = [...new Set(Array.from({ length: n }, () => rnd(40)))]
    return labels.map((label) => ({ label, score: rnd(5) / 4 })).sort((a, b) => b.score - a.score)
  }
  const weights: FusionWeights[] = [FUSION, FUSION_BY_EMBEDDER.neural, { vector: 0.5, keyword: 0.5, normalisation: 'minmax' }]
  let compared = 0
  for (let i = 0; i < 600; i++) {
    const vector = list(rnd(35))
    const keyword = list(rnd(35))
    const exact = new Set(rnd(3) === 0 ? [] : Array.from({ length: rnd(6) }, () => rnd(40)))
    const limit = [0, 1, 3, 10, 30, 100][rnd(6)]!
    const w = weights[rnd(weights.length)]!
    const got = rank('hybrid', vector, keyword, limit, exact, w)
    const want = reference(vector, keyword, limit, exact, w)
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      t.same(got, want, `case ${i}`)
      return
    }
    compared += got.length
  }
  t.ok(compared > 5000, `every case equal (${compared} hits compared)`)
})
