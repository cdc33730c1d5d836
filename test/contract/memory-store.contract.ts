// The conformance suite every MemoryStore must pass (brute-force reference, HNSW + LMDB).
import type { Test } from 'tap'
import type { MemoryStore, NewMemoryEntry } from '../../src/core/memory-store.js'

export type MemoryFactory = () => Promise<{
  store: MemoryStore
  reopen?: () => Promise<MemoryStore>
  /** Damages whatever the store derives from its entries and keeps on disk (index files), while it is closed. */
  damageDerived?: () => Promise<void>
  cleanup: () => Promise<void>
}>

const S1 = '01900000-0000-7000-8000-000000000001'
const S2 = '01900000-0000-7000-8000-000000000002'

export const entry = (content: string, extra: Partial<NewMemoryEntry> = {}): NewMemoryEntry => ({
  tenant: 'acme',
  content,
  session_id: S1,
  turn: 1,
  seq: 2,
  ...extra,
})

export function memoryStoreContract(t: Test, factory: MemoryFactory): void {
  const withStore = (name: string, fn: (t: Test, store: MemoryStore, ctx: Awaited<ReturnType<MemoryFactory>>) => Promise<void>) =>
    t.test(name, async (t) => {
      const ctx = await factory()
      t.teardown(() => ctx.cleanup())
      await fn(t, ctx.store, ctx)
    })

  withStore('an empty store finds nothing', async (t, store) => {
    t.same(await store.search({ tenant: 'acme', text: 'anything', limit: 5 }), [])
    t.equal(await store.count('acme'), 0)
  })

  withStore('added entries come back with provenance, best match first, scores in 0..1', async (t, store) => {
    const added = await store.add([
      entry('The deployment to the staging cluster failed because the database migration timed out.', { turn: 3, seq: 17 }),
      entry('We agreed the quarterly report is due on the first Monday of the month.', { turn: 4, seq: 21 }),
      entry('Invoice INV-2024-0042 was paid by bank transfer on March 3rd.', { turn: 5, seq: 30, session_id: S2 }),
    ])
    t.equal(added.length, 3)
    t.ok(added.every((e) => typeof e.id === 'string' && e.id.length > 0 && e.created_at))
    t.equal(new Set(added.map((e) => e.id)).size, 3, 'ids are unique')
    t.equal(await store.count('acme'), 3)
    for (const mode of ['hybrid', 'vector', 'keyword'] as const) {
      const hits = await store.search({ tenant: 'acme', text: 'why did the staging deployment fail?', limit: 3, mode })
      t.ok(hits.length >= 1, `${mode}: found something`)
      t.match(hits[0]!.entry.content, /staging cluster/, `${mode}: the right passage first`)
      t.same(
        { session_id: hits[0]!.entry.session_id, turn: hits[0]!.entry.turn, seq: hits[0]!.entry.seq },
        { session_id: S1, turn: 3, seq: 17 },
      )
      t.ok(
        hits.every((h) => h.score >= 0 && h.score <= 1),
        `${mode}: scores in 0..1`,
      )
      for (let i = 1; i < hits.length; i++) t.ok(hits[i - 1]!.score >= hits[i]!.score, `${mode}: ordered by score`)
    }
  })

  withStore('an exact identifier is found', async (t, store) => {
    await store.add([
      entry('Invoice INV-2024-0042 was paid by bank transfer on March 3rd.'),
      entry('Invoice INV-2024-0043 is still open.'),
      ...Array.from({ length: 30 }, (_, i) => entry(`Invoice number ${1000 + i} concerns office supplies and was processed normally.`)),
    ])
    const hits = await store.search({ tenant: 'acme', text: 'INV-2024-0042', limit: 3 })
    t.match(hits[0]!.entry.content, /INV-2024-0042 was paid/)
  })

  withStore('limit is respected', async (t, store) => {
    await store.add(Array.from({ length: 12 }, (_, i) => entry(`note ${i} about the weekly team meeting agenda`)))
    t.equal((await store.search({ tenant: 'acme', text: 'team meeting', limit: 5 })).length, 5)
    t.equal((await store.search({ tenant: 'acme', text: 'team meeting', limit: 20 })).length, 12)
  })

  withStore('tenants never see each other', async (t, store) => {
    await store.add([
      entry('The launch code is saffron-47.', { tenant: 'acme' }),
      entry('Our launch code is cobalt-12.', { tenant: 'globex' }),
    ])
    for (const mode of ['hybrid', 'vector', 'keyword'] as const) {
      const a = await store.search({ tenant: 'acme', text: 'launch code cobalt-12', limit: 10, mode })
      t.ok(
        a.every((h) => h.entry.tenant === 'acme'),
        `${mode}: only acme's entries`,
      )
      t.notOk(
        a.some((h) => h.entry.content.includes('cobalt')),
        `${mode}: globex's secret is not reachable`,
      )
    }
    t.same(await store.search({ tenant: 'initech', text: 'launch code', limit: 10 }), [])
    t.equal(await store.count('globex'), 1)
  })

  withStore('session scope, and deleting a session removes its entries', async (t, store) => {
    await store.add([
      entry('Session one talks about the red bicycle.', { session_id: S1 }),
      entry('Session two talks about the red bicycle too.', { session_id: S2 }),
      entry('A tenant-wide document about bicycles.', { session_id: null }),
    ])
    const scoped = await store.search({ tenant: 'acme', text: 'red bicycle', limit: 10, sessionId: S2 })
    t.same(
      scoped.map((h) => h.entry.session_id),
      [S2],
    )
    t.equal(await store.deleteSession('acme', S1), 1)
    const after = await store.search({ tenant: 'acme', text: 'red bicycle', limit: 10 })
    t.notOk(
      after.some((h) => h.entry.session_id === S1),
      'gone from vector and keyword results',
    )
    t.equal(after.length, 2)
    t.equal(await store.count('acme'), 2)
    t.equal(await store.deleteSession('acme', S1), 0)
  })

  withStore('entries survive reopening the store', async (t, store, ctx) => {
    if (!ctx.reopen) {
      t.pass('in-memory reference: nothing to reopen')
      return
    }
    await store.add([entry('The wifi password for the guest network is tangerine.'), entry('Lunch is at noon.', { session_id: S2 })])
    await store.deleteSession('acme', S2)
    await store.close()
    const again = await ctx.reopen()
    const hits = await again.search({ tenant: 'acme', text: 'guest wifi password', limit: 5 })
    t.match(hits[0]!.entry.content, /tangerine/)
    t.equal(await again.count('acme'), 1)
    t.notOk(
      hits.some((h) => h.entry.session_id === S2),
      'deleted entries stay deleted',
    )
  })

  // Post-commit guarantees: what add() acknowledged is the truth; anything derived from it
  // (indexes, caches) may be lost or damaged without losing an entry or failing a call.
  withStore('acknowledged entries are found whatever happened to derived state', async (t, store, ctx) => {
    if (!ctx.reopen || !ctx.damageDerived) {
      t.pass('nothing derived is kept')
      return
    }
    await store.add([
      entry('The greenhouse thermostat is set to nineteen degrees.'),
      entry('Parcel lockers are emptied at four in the afternoon.'),
    ])
    await store.close()
    await ctx.damageDerived()
    const again = await ctx.reopen()
    const added = await again.add([entry('The rooftop beehives are inspected every Saturday.')])
    t.equal(added.length, 1, 'an add answers normally')
    for (const [query, want] of [
      ['greenhouse thermostat temperature', /greenhouse/],
      ['when are the parcel lockers emptied', /Parcel lockers/],
      ['rooftop beehives inspection', /beehives/],
    ] as const) {
      for (const mode of ['vector', 'hybrid'] as const)
        t.match((await again.search({ tenant: 'acme', text: query, limit: 1, mode }))[0]?.entry.content, want, `${mode}: ${query}`)
    }
    t.equal(await again.count('acme'), 3)
    t.equal(again.healthy(), true)
  })

  withStore('a deleted session stays deleted: nothing is added to it afterwards', async (t, store) => {
    await store.add([entry('A note of session one.', { session_id: S1 })])
    t.equal(await store.deleteSession('acme', S1), 1)
    await t.rejects(
      store.add([entry('A late note of session one.', { session_id: S1 }), entry('A note of session two.', { session_id: S2 })]),
      { code: 'SESSION_NOT_FOUND' },
    )
    t.equal(await store.count('acme'), 0, 'nothing of the refused batch was stored')
    t.equal((await store.add([entry('A note of session two.', { session_id: S2 })])).length, 1, 'other sessions are not affected')
    t.equal(await store.count('acme'), 1)
  })

  // ---- managing entries: get, delete, list, metadata filters ----------------------------

  withStore("get returns an entry of the tenant; another tenant's id answers like an unknown one", async (t, store) => {
    const [a, g] = await store.add([
      entry('Acme keeps its spare keys in drawer four.', { metadata: { kind: 'fact' } }),
      entry('Globex keys.', { tenant: 'globex' }),
    ])
    t.match(await store.get('acme', a!.id), {
      id: a!.id,
      tenant: 'acme',
      content: /drawer four/,
      session_id: S1,
      turn: 1,
      seq: 2,
      metadata: { kind: 'fact' },
    })
    t.equal(await store.get('acme', g!.id), null, "globex's entry is not acme's")
    t.equal(await store.get('acme', '01900000-0000-7000-8000-00000000dead'), null)
    t.equal(await store.delete('acme', g!.id), false, "acme cannot delete globex's entry")
    t.ok(await store.get('globex', g!.id), 'and it is still there')
  })

  withStore('delete removes one entry from every index, and only that one', async (t, store) => {
    const added = await store.add([
      entry('The orange forklift is parked in bay seven.', { session_id: S1 }),
      entry('The orange forklift battery is charged overnight.', { session_id: S2 }),
      entry('Bay seven is also where the pallets are stacked.', { session_id: null }),
    ])
    t.equal(await store.delete('acme', added[0]!.id), true)
    t.equal(await store.delete('acme', added[0]!.id), false, 'a second delete finds nothing')
    t.equal(await store.get('acme', added[0]!.id), null)
    t.equal(await store.count('acme'), 2)
    for (const mode of ['hybrid', 'vector', 'keyword'] as const) {
      const hits = await store.search({ tenant: 'acme', text: 'orange forklift bay seven', limit: 10, mode })
      t.notOk(
        hits.some((h) => h.entry.id === added[0]!.id),
        `${mode}: the deleted entry is not found`,
      )
    }
    t.same(await store.search({ tenant: 'acme', text: 'orange forklift', limit: 10, sessionId: S1 }), [], 'nor in its session scope')
    t.same((await store.list('acme', { limit: 10, sessionId: S1 })).items, [], 'nor in its session list')
    t.equal(await store.deleteSession('acme', S2), 1, 'the session count excludes what was deleted alone')
    t.equal(await store.count('acme'), 1)
  })

  withStore("list pages through the tenant's entries in insertion order, with no duplicate or gap", async (t, store) => {
    const added = await store.add(
      Array.from({ length: 11 }, (_, i) =>
        entry(`numbered note ${i}`, { session_id: i % 2 ? S2 : S1, metadata: { parity: i % 2 ? 'odd' : 'even', n: String(i) } }),
      ),
    )
    await store.add([entry('not acme', { tenant: 'globex' })])
    const seen: string[] = []
    let cursor: string | undefined
    let pages = 0
    do {
      const page = await store.list('acme', { limit: 4, ...(cursor ? { cursor } : {}) })
      t.ok(page.items.length <= 4)
      seen.push(...page.items.map((e) => e.id))
      cursor = page.next_cursor ?? undefined
      pages++
    } while (cursor)
    t.equal(pages, 3)
    t.same(
      seen,
      added.map((e) => e.id),
      'every entry once, in insertion order',
    )
    const odd = await store.list('acme', { limit: 100, metadata: { parity: 'odd' } })
    t.same(
      odd.items.map((e) => e.metadata?.n),
      ['1', '3', '5', '7', '9'],
    )
    t.equal(odd.next_cursor, null)
    t.same(
      (await store.list('acme', { limit: 100, metadata: { parity: 'odd', n: '3' } })).items.map((e) => e.metadata?.n),
      ['3'],
      'every pair must match',
    )
    t.same((await store.list('acme', { limit: 100, metadata: { parity: 'odd', n: '4' } })).items, [])
    const s1 = await store.list('acme', { limit: 2, sessionId: S1 })
    t.same(
      s1.items.map((e) => e.metadata?.n),
      ['0', '2'],
    )
    const s1next = await store.list('acme', { limit: 10, sessionId: S1, cursor: s1.next_cursor! })
    t.same(
      s1next.items.map((e) => e.metadata?.n),
      ['4', '6', '8', '10'],
    )
    t.same((await store.list('acme', { limit: 10, sessionId: S1, metadata: { parity: 'odd' } })).items, [])
    t.same(await store.list('initech', { limit: 10 }), { items: [], next_cursor: null })
    await t.rejects(store.list('acme', { limit: 10, cursor: 'not-a-cursor' }), { code: 'INVALID_REQUEST' })
  })

  withStore('a metadata filter applies before ranking: limit hits come back when enough match', async (t, store) => {
    await store.add([
      ...Array.from({ length: 40 }, (_, i) =>
        entry(`Conference room booking number ${i} for the design review.`, { metadata: { team: 'design' } }),
      ),
      ...Array.from({ length: 3 }, (_, i) =>
        entry(`Kitchen rota entry ${i}: dishwasher duty.`, { metadata: { team: 'ops', shift: i === 0 ? 'early' : 'late' } }),
      ),
    ])
    for (const mode of ['hybrid', 'vector', 'keyword'] as const) {
      const hits = await store.search({
        tenant: 'acme',
        text: 'conference room booking design review',
        limit: 3,
        mode,
        metadata: { team: 'ops' },
      })
      // No ops entry shares a word with the query: keyword ranking alone finds none of them.
      if (mode !== 'keyword') t.equal(hits.length, 3, `${mode}: as many hits as asked for, though 40 others rank higher`)
      t.ok(
        hits.every((h) => h.entry.metadata?.team === 'ops'),
        `${mode}: only matching entries`,
      )
      const both = await store.search({
        tenant: 'acme',
        text: 'kitchen dishwasher',
        limit: 10,
        mode,
        metadata: { team: 'ops', shift: 'late' },
      })
      t.ok(both.length > 0 && both.every((h) => h.entry.metadata?.shift === 'late'), `${mode}: every pair must match`)
    }
    t.same(await store.search({ tenant: 'acme', text: 'kitchen', limit: 5, metadata: { team: 'sales' } }), [])
    const hit = (await store.search({ tenant: 'acme', text: 'kitchen dishwasher', limit: 1, metadata: { shift: 'early' } }))[0]
    t.match(hit?.entry, { id: String, metadata: { team: 'ops', shift: 'early' } }, 'hits carry the id and metadata')
  })

  withStore('a deleted entry stays deleted after reopening', async (t, store, ctx) => {
    if (!ctx.reopen) {
      t.pass('in-memory reference: nothing to reopen')
      return
    }
    const [a, b] = await store.add([entry('The vault combination is 31-7-22.'), entry('The vault is in the basement.')])
    t.equal(await store.delete('acme', a!.id), true)
    await store.close()
    const again = await ctx.reopen()
    t.equal(await again.get('acme', a!.id), null)
    t.ok(await again.get('acme', b!.id))
    t.notOk((await again.search({ tenant: 'acme', text: 'vault combination', limit: 5 })).some((h) => h.entry.id === a!.id))
    t.equal(await again.count('acme'), 1)
  })

  withStore('healthy while writes succeed', async (t, store) => {
    t.equal(store.healthy(), true)
    await store.add([entry('Anything at all.')])
    t.equal(store.healthy(), true)
  })
}
