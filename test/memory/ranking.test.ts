import t from 'tap'
import { exactTerms } from '../../src/memory/text-features.js'
import { rank } from '../../src/memory/memory-ranking.js'
import { fuse } from '../../src/memory/rank-fusion.js'

t.test('exactTerms: what a query means literally', async (t) => {
  t.same(exactTerms('what changed in 2.13.13?'), ['2.13.13'])
  t.same(exactTerms('status of SUP-48213'), ['sup-48213'])
  t.same(exactTerms('who wrote 124de94?'), ['124de94'])
  t.same(exactTerms('what is Helga Castellanos working on?').sort(), ['castellano', 'helga'])
  t.same(exactTerms('When did we pay the bill?'), [], 'a capital at the start of the query is not a name')
  t.same(exactTerms('the meeting moved to next week'), [])
})

t.test('fusion: weighted reciprocal ranks, normalised to 0..1', async (t) => {
  const f = fuse([[1, 2, 3], [3, 2, 1]], 3)
  t.equal(f.length, 3)
  t.ok(f.every((r) => r.score > 0 && r.score <= 1))
  t.same(fuse([[7], [7]], 1), [{ label: 7, score: 1 }], 'first in every list scores 1')
  t.equal(fuse([[1, 2], [2, 1]], 2, 60, [1, 3])[0]!.label, 2, 'a heavier list wins ties of rank')
})

t.test('hybrid ranking puts exact matches first, keeping scores ordered', async (t) => {
  const vector = [{ label: 1, score: 0.9 }, { label: 2, score: 0.8 }, { label: 3, score: 0.7 }]
  const keyword = [{ label: 3, score: 9 }, { label: 4, score: 5 }, { label: 1, score: 1 }]
  const r = rank('hybrid', vector, keyword, 4, new Set([3, 4]))
  t.same(r.slice(0, 2).map((x) => x.label), [3, 4], 'exact matches, in keyword order')
  for (let i = 1; i < r.length; i++) t.ok(r[i - 1]!.score >= r[i]!.score)
  t.ok(r.every((x) => x.score >= 0 && x.score <= 1))
  t.same(rank('keyword', vector, keyword, 2).map((x) => x.score), [1, 5 / 9])
  t.same(rank('vector', vector, keyword, 1), [{ label: 1, score: 0.9 }])
})
