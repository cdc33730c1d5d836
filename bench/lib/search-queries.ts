// The memory search benchmarks' queries: 3–5 content words of held-out chat messages, in order.
import { appImport } from './app.js'
import { Rng, shortTexts } from './memory-corpus.js'

const { STOPWORDS } = await appImport<typeof import('../../src/memory/text-features.js')>('memory/text-features.js')

/** Up to `n` queries (messages with fewer than 3 content words give none), seeded: the same in every run. */
export function searchQueries(n: number): string[] {
  const r = new Rng(4242)
  return shortTexts(n, 99)
    .map((text) => {
      const words = (text.match(/[A-Za-z][A-Za-z'-]{2,}/g) ?? []).filter((w) => !STOPWORDS.has(w.toLowerCase()))
      const k = Math.min(words.length, r.range(3, 5))
      const start = r.range(0, Math.max(0, words.length - k))
      return words.slice(start, start + k).join(' ')
    })
    .filter((q) => q.split(' ').length >= 3)
}
