// The optional neural embedder, for real: the model from the weights inside node_modules, in a
// worker thread, with the network cut in that worker (a load that tried it would fail).
import t from 'tap'
import { cosine } from '../../src/memory/memory-ranking.js'
import { UseLiteEmbedder } from '../../src/memory/use-lite-embedder.js'

t.test('use-lite embeds offline, off the event loop, with sentence-level meaning', async (t) => {
  const e = await UseLiteEmbedder.open()
  t.teardown(() => e.close())
  t.equal(e.dimensions, 512)
  t.match(e.id, /universal-sentence-encoder-lite.*512/, 'the id names the model and its dimensions')
  t.equal(e.networkAttempts, 0, 'loading never touched the network')

  const [q, para, other, unrelated] = await e.embed([
    'Does Maria have a dog now?',
    'Maria: we finally brought home a beagle puppy from the shelter',
    'Maria: the budget review moved to Monday',
    'The quarterly ledger export lists overdue invoices for Globex',
  ])
  for (const v of [q!, para!, other!, unrelated!]) t.ok(Math.abs(Math.hypot(...v) - 1) < 1e-5, 'unit length')
  t.ok(cosine(q!, para!) > cosine(q!, other!), 'the paraphrase is closer than another sentence of the same speaker')
  t.ok(cosine(q!, para!) > cosine(q!, unrelated!), 'and closer than an unrelated sentence')

  // The event loop keeps turning while a batch is embedded in the worker.
  let ticks = 0
  const timer = setInterval(() => ticks++, 1)
  const batch = await e.embed(Array.from({ length: 24 }, (_, i) => `sentence ${i} about the offsite in Porto and the new coffee machine`))
  clearInterval(timer)
  t.equal(batch.length, 24)
  t.ok(ticks >= 5, `timers ran during the batch (${ticks} ticks)`)
  t.same(await e.embed([]), [])
  const again = await e.embed(['Does Maria have a dog now?'])
  t.ok(cosine(again[0]!, q!) > 0.9999, 'deterministic')
  t.equal(e.networkAttempts, 0)
})

t.test('a closed embedder refuses', async (t) => {
  const e = await UseLiteEmbedder.open()
  await e.close()
  await t.rejects(e.embed(['x']), /closed/)
})

t.test(
  'the store acknowledges use-lite adds before their vectors exist, finds them by their words at once and by meaning once embedded',
  async (t) => {
    const { mkdtemp, rm } = await import('node:fs/promises')
    const { tmpdir } = await import('node:os')
    const { join } = await import('node:path')
    const { HnswMemoryStore } = await import('../../src/memory/hnsw-memory-store.js')
    const { eventually } = await import('../helpers/harness.js')
    const dir = await mkdtemp(join(tmpdir(), 'burrow-uselite-store-'))
    const e = await UseLiteEmbedder.open()
    const store = await HnswMemoryStore.open({ dataDir: dir, embedder: e, durability: 'relaxed' })
    t.teardown(async () => {
      await store.close()
      await e.close()
      await rm(dir, { recursive: true, force: true })
    })
    const texts = [
      'Maria: we finally brought home a beagle puppy from the shelter',
      'Omar: the budget review moved to Monday',
      ...Array.from({ length: 60 }, (_, i) => `Note ${i}: the ledger export for Globex lists invoice ${1000 + i} as overdue`),
    ]
    const t0 = performance.now()
    const added = await store.add(texts.map((content) => ({ tenant: 'acme', content, session_id: null, turn: null, seq: null })))
    const ms = performance.now() - t0
    t.equal(added.length, texts.length)
    t.equal(store.indexBacklog(), texts.length, `acknowledged before any vector was made (${ms.toFixed(0)} ms for ${texts.length} entries)`)
    t.equal(
      (await store.search({ tenant: 'acme', text: 'beagle puppy shelter', limit: 1 }))[0]?.entry.id,
      added[0]!.id,
      'found by its words at once',
    )
    await eventually(() => store.indexBacklog() === 0, 60_000)
    t.equal(
      (await store.search({ tenant: 'acme', text: 'Does Maria have a dog now?', limit: 1, mode: 'vector' }))[0]?.entry.id,
      added[0]!.id,
      'and by meaning once embedded in the background',
    )
  },
)
