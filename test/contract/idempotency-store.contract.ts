// The conformance suite every IdempotencyStore must pass (the in-memory one of ephemeral mode, LMDB,
// PostgreSQL): what the Idempotency class (src/session/idempotency.ts) relies on, whatever keeps the records.
import type { Test } from 'tap'
import type { IdempotencyRecord, IdempotencyStore } from '../../src/core/stores.js'
import { idempotencyKey } from '../../src/session/idempotency.js'
import { eventually, sleep } from '../helpers/harness.js'

export interface IdempotencyStoreHandle {
  store: IdempotencyStore
  /** Drops records older than the TTL, resolving to how many (stores that keep records: LMDB, PostgreSQL). */
  sweep?: () => Promise<number>
  /** The same records as the next process to open them sees them (stores that outlive the process). */
  reopen?: () => Promise<IdempotencyStore>
  /**
   * Another process sharing the store (stores with claims), with its own claims; `stop` ends it as a
   * crash would for its claims: they are no longer renewed.
   */
  peer?: () => Promise<{ store: IdempotencyStore; stop: () => Promise<void> }>
  cleanup: () => Promise<void>
}

/** `ttlMs`: how long records are remembered; `claimMs`: how long a claim holds unless renewed (stores with claims). */
export type IdempotencyStoreFactory = (opts: { ttlMs: number; claimMs: number }) => Promise<IdempotencyStoreHandle>

const DAY = 24 * 3600 * 1000
const S1 = '01900000-0000-7000-8000-000000000001'
const S10 = '01900000-0000-7000-8000-0000000000010'
const S2 = '01900000-0000-7000-8000-000000000002'

/** Caller keys as the surfaces let them through: a header's latin-1 text, or any JSON string of up to 255 characters (JSON-RPC). */
const ODD_KEYS = [
  'k',
  'K',
  'k ',
  '0f8fad5b-d9cb-469f-a165-70867728950e',
  'é',
  '😀',
  '\uffff',
  '\ud800',
  'a\u0000b',
  '\u0000',
  '\u0001"x"',
  'x'.repeat(255),
  // Long keys (64 characters and more are written differently by lmdb-js) with control characters and a lone surrogate.
  `\u0010${'y'.repeat(70)}`,
  `\u0004\u001b${'z'.repeat(70)}`,
  `\ud800${'w'.repeat(70)}`,
  `\ufffd${'w'.repeat(70)}`,
]

const ok = (value: unknown, created_at = Date.now(), fingerprint = 'fp-1'): IdempotencyRecord => ({
  fingerprint,
  created_at,
  outcome: { ok: true, value },
})

/** A value with the text a turn's result may hold: NUL, emoji, lone surrogates, a long string, nesting. */
const oddValue = () => ({
  session_id: S1,
  output_text: 'nul \u0000 here, emoji 😀🦫, lone \ud800 and \udc00, quote " backslash \\ newline \n',
  long: 'y'.repeat(300_000),
  numbers: [0, 1, -1, 1.5, 1e21, Number.MAX_SAFE_INTEGER],
  nested: { a: [{ b: null, c: true, d: false }], empty: {}, list: [] },
})

export function idempotencyStoreContract(t: Test, factory: IdempotencyStoreFactory, opts: { shared: boolean }): void {
  const withStore = (
    name: string,
    fn: (t: Test, store: IdempotencyStore, ctx: IdempotencyStoreHandle) => Promise<void>,
    o: { ttlMs?: number; claimMs?: number } = {},
  ) =>
    t.test(name, async (t) => {
      const ctx = await factory({ ttlMs: o.ttlMs ?? DAY, claimMs: o.claimMs ?? 10_000 })
      t.teardown(() => ctx.cleanup())
      await fn(t, ctx.store, ctx)
    })

  withStore('an unknown key is undefined; a record reads back exactly as it was put', async (t, store) => {
    const key = idempotencyKey('acme', S1, 'k1')
    t.equal(await store.get(key), undefined)
    const success = ok(oddValue())
    await store.put(key, success)
    t.strictSame(await store.get(key), success)
    const failure: IdempotencyRecord = {
      fingerprint: 'fp-2',
      created_at: Date.now(),
      outcome: { ok: false, code: 'PROVIDER_ERROR', message: 'upstream said \u0000 😀', data: { turn: 3, detail: { status: 502 } } },
    }
    const other = idempotencyKey('acme', null, 'k1')
    await store.put(other, failure)
    t.strictSame(await store.get(other), failure, 'a remembered failure, outside a session')
    t.strictSame(await store.get(key), success, 'the first record is untouched')
  })

  withStore('a record is kept as a value: changing the object put, or one read, changes nothing stored', async (t, store) => {
    const key = idempotencyKey('acme', S1, 'k')
    const put = ok({ list: [1], text: 'first' })
    await store.put(key, put)
    ;(put.outcome as { value: { list: number[] } }).value.list.push(2)
    put.fingerprint = 'changed'
    const read = (await store.get(key))!
    t.strictSame(read, ok({ list: [1], text: 'first' }, put.created_at))
    ;(read.outcome as { value: { text: string } }).value.text = 'changed'
    t.strictSame(await store.get(key), ok({ list: [1], text: 'first' }, put.created_at))
  })

  withStore('keys are scoped by tenant, session and the caller key, whatever text the caller key holds', async (t, store) => {
    const keys = [
      ...ODD_KEYS.map((k) => idempotencyKey('acme', S1, k)),
      idempotencyKey('other', S1, 'k'),
      idempotencyKey('acme', S2, 'k'),
      idempotencyKey('acme', S10, 'k'),
      idempotencyKey('acme', null, 'k'),
    ]
    t.equal(new Set(keys).size, keys.length)
    const put = new Map(keys.map((key, i) => [key, ok(i, Date.now(), `fp-${i}`)]))
    for (const [key, rec] of put) await store.put(key, rec)
    for (const [key, rec] of put) t.strictSame(await store.get(key), rec, JSON.stringify(key))
  })

  withStore("deletePrefix drops one session's records, whatever their caller keys, and nothing else", async (t, store) => {
    const mine = ODD_KEYS.map((k) => idempotencyKey('acme', S1, k))
    const others = [
      idempotencyKey('other', S1, 'k'),
      idempotencyKey('acme', S2, 'k'),
      idempotencyKey('acme', S10, 'k'),
      idempotencyKey('acme', null, 'k'),
      idempotencyKey('acme', null, '😀'),
    ]
    const put = new Map([...mine, ...others].map((key) => [key, ok(key)]))
    for (const [key, rec] of put) await store.put(key, rec)
    for (const key of mine) t.strictSame(await store.get(key), put.get(key), `stored: ${JSON.stringify(key)}`)
    await store.deletePrefix(idempotencyKey('acme', S1, ''))
    for (const key of mine) t.equal(await store.get(key), undefined, `dropped: ${JSON.stringify(key)}`)
    for (const key of others) t.strictSame(await store.get(key), put.get(key), `kept: ${JSON.stringify(key)}`)
    await store.deletePrefix(idempotencyKey('acme', S1, ''))
    await store.deletePrefix(idempotencyKey('nobody', S2, ''))
    for (const key of others) t.strictSame(await store.get(key), put.get(key), `deleting nothing changes nothing: ${JSON.stringify(key)}`)
  })

  withStore('a later put replaces the record', async (t, store) => {
    const key = idempotencyKey('acme', S1, 'k')
    await store.put(key, ok('first', Date.now(), 'fp-a'))
    const second: IdempotencyRecord = {
      fingerprint: 'fp-b',
      created_at: Date.now(),
      outcome: { ok: false, code: 'TURN_FAILED', message: 'm' },
    }
    await store.put(key, second)
    t.strictSame(await store.get(key), second)
  })

  withStore(
    'a record older than the TTL is not returned; a put with a new time renews the key',
    async (t, store) => {
      const key = idempotencyKey('acme', S1, 'k')
      await store.put(key, ok('old', Date.now() - 10_000))
      t.equal(await store.get(key), undefined, 'put already expired')
      const fresh = ok('fresh')
      await store.put(key, fresh)
      t.strictSame(await store.get(key), fresh, 'a new record under the key')
      // The real clock: the record goes once its TTL has passed (polled, the machine may be slow).
      await eventually(async () => (await store.get(key)) === undefined, 30_000)
      t.pass('expired on its own')
    },
    { ttlMs: 4000 },
  )

  t.test('sweep drops the records older than the TTL and says how many', async (t) => {
    // A TTL the machine's slowest moments stay well inside between a put and the sweep after it.
    const ttlMs = 4000
    const ctx = await factory({ ttlMs, claimMs: 10_000 })
    t.teardown(() => ctx.cleanup())
    const { store, sweep } = ctx
    if (!sweep) {
      // The in-memory store keeps nothing across processes: its records expire as they are read (the test above).
      t.equal(opts.shared, false, 'a shared store keeps records other processes read: it must be swept')
      return
    }
    // Long keys too (a UUID), and one with a control character (a JSON-RPC key may hold them).
    const old = ['0f8fad5b-d9cb-469f-a165-70867728950e', `\u0010${'y'.repeat(70)}`, 'old'].map((k) => idempotencyKey('acme', S1, k))
    const young = [0, 1].map((i) => idempotencyKey('acme', S2, `young-${i}`))
    for (const key of old) await store.put(key, ok(key, Date.now() - 2 * ttlMs))
    for (const key of young) await store.put(key, ok(key))
    t.equal(await sweep(), 3)
    for (const key of young) t.equal((await store.get(key))?.outcome.ok, true, 'a young record stays')
    t.equal(await sweep(), 0, 'nothing left to sweep')
    await sleep(ttlMs + 500)
    t.equal(await sweep(), 2, 'the young ones, once their TTL has passed')
    t.equal(await sweep(), 0)
  })

  withStore('records outlive the process (stores that keep them)', async (t, store, ctx) => {
    const key = idempotencyKey('acme', S1, 'k')
    const rec = ok(oddValue())
    await store.put(key, rec)
    if (!ctx.reopen) {
      t.equal(opts.shared, false, 'a shared store outlives its processes')
      return
    }
    const again = await ctx.reopen()
    t.strictSame(await again.get(key), rec)
  })

  if (!opts.shared) {
    withStore('a store one process owns takes no claims: the caller reads, runs, then puts', async (t, store) => {
      t.equal(store.claim, undefined)
      t.equal(store.release, undefined)
    })
    return
  }

  const claimOf = (store: IdempotencyStore, key: string, fp: string) => store.claim!(key, fp)

  withStore('a claim holds the key: no outcome yet, the key answers running, and the outcome completes it', async (t, store, ctx) => {
    t.type(store.claim, 'function')
    t.type(store.release, 'function')
    const peer = await ctx.peer!()
    t.teardown(() => peer.stop())
    const key = idempotencyKey('acme', S1, '😀 key')
    t.match(await claimOf(store, key, 'fp-1'), { kind: 'claimed' })
    t.equal(await store.get(key), undefined, 'a claim is not an outcome')
    t.same(
      await claimOf(peer.store, key, 'fp-2'),
      { kind: 'running', fingerprint: 'fp-1' },
      'another process sees it running, with its fingerprint',
    )
    t.same(await claimOf(store, key, 'fp-1'), { kind: 'running', fingerprint: 'fp-1' }, 'a second claim in the same process too')
    const rec = ok(oddValue())
    await store.put(key, rec)
    t.strictSame(await store.get(key), rec, 'the outcome replaces the claim')
    t.strictSame(await claimOf(peer.store, key, 'fp-1'), { kind: 'done', record: rec })
    t.strictSame(await peer.store.get(key), rec)
  })

  withStore('release frees a claimed key; a process that does not hold the claim cannot release it', async (t, store, ctx) => {
    const peer = await ctx.peer!()
    t.teardown(() => peer.stop())
    const key = idempotencyKey('acme', S1, 'k')
    t.match(await claimOf(store, key, 'fp-1'), { kind: 'claimed' })
    await peer.store.release!(key)
    t.same(await claimOf(peer.store, key, 'fp-2'), { kind: 'running', fingerprint: 'fp-1' }, "the peer's release did nothing")
    await store.release!(key)
    t.equal(await store.get(key), undefined)
    t.match(await claimOf(peer.store, key, 'fp-2'), { kind: 'claimed' }, 'free again')
    const done = await store.get(idempotencyKey('acme', S1, 'other'))
    t.equal(done, undefined)
    await store.put(idempotencyKey('acme', S1, 'other'), ok('x'))
    await store.release!(idempotencyKey('acme', S1, 'other'))
    t.equal((await store.get(idempotencyKey('acme', S1, 'other')))?.outcome.ok, true, 'release never drops an outcome')
  })

  withStore(
    'an outcome older than the TTL can be claimed again',
    async (t, store) => {
      const key = idempotencyKey('acme', S1, 'k')
      await store.put(key, ok('old', Date.now() - 5000, 'fp-old'))
      t.match(await claimOf(store, key, 'fp-new'), { kind: 'claimed' })
    },
    { ttlMs: 2000 },
  )

  withStore(
    "a live claim is renewed past its duration; a stopped process's claim expires and can be taken",
    async (t, store, ctx) => {
      const peer = await ctx.peer!()
      t.teardown(() => peer.stop())
      const mine = idempotencyKey('acme', S1, 'mine')
      const theirs = idempotencyKey('acme', S1, 'theirs')
      t.match(await claimOf(store, mine, 'fp-1'), { kind: 'claimed' })
      t.match(await claimOf(peer.store, theirs, 'fp-2'), { kind: 'claimed' })
      await peer.stop()
      t.same(await claimOf(store, theirs, 'fp-3'), { kind: 'running', fingerprint: 'fp-2' }, 'held until its duration passes')
      await eventually(async () => (await claimOf(store, theirs, 'fp-3')).kind === 'claimed', 20_000)
      t.pass("the stopped process's claim was taken over")
      await sleep(2500)
      const other = await ctx.peer!()
      t.teardown(() => other.stop())
      t.same(await claimOf(other.store, mine, 'fp-4'), { kind: 'running', fingerprint: 'fp-1' }, 'still held, renewed')
    },
    { claimMs: 1000 },
  )

  t.test("sweep drops a stopped process's claim once older than the TTL, never a live one", async (t) => {
    const ctx = await factory({ ttlMs: 1000, claimMs: 1000 })
    t.teardown(() => ctx.cleanup())
    const { store } = ctx
    const peer = await ctx.peer!()
    t.teardown(() => peer.stop())
    const live = idempotencyKey('acme', S1, 'live')
    const abandoned = idempotencyKey('acme', S2, 'abandoned')
    t.match(await claimOf(store, live, 'fp-1'), { kind: 'claimed' })
    t.match(await claimOf(peer.store, abandoned, 'fp-2'), { kind: 'claimed' })
    await peer.stop()
    await sleep(2500)
    t.equal(await ctx.sweep!(), 1, 'the abandoned claim, nothing else')
    t.equal(await ctx.sweep!(), 0)
    const other = await ctx.peer!()
    t.teardown(() => other.stop())
    t.same(await claimOf(other.store, live, 'fp-9'), { kind: 'running', fingerprint: 'fp-1' }, 'the live claim stays')
  })
}
