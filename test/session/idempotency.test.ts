// Idempotent calls on their own: at most one run per key, conflicts, what is remembered.
import t from 'tap'
import { BurrowError } from '../../src/core/errors.js'
import type { IdempotencyRecord, IdempotencyStore } from '../../src/core/stores.js'
import { canonicalJson, fingerprint, Idempotency, idempotencyKey } from '../../src/session/idempotency.js'
import { MemoryIdempotencyStore } from '../../src/store/memory-idempotency-store.js'

const store = () => new MemoryIdempotencyStore(60_000)
const code = async (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => (e as BurrowError).code,
  )

t.test('a body matches whatever its key order; undefined fields do not count', async (t) => {
  t.equal(canonicalJson({ b: 1, a: [{ d: 2, c: null }], u: undefined }), '{"a":[{"c":null,"d":2}],"b":1}')
  t.equal(fingerprint('turn/start', { input: 'x', max_tokens: 5 }), fingerprint('turn/start', { max_tokens: 5, input: 'x' }))
  t.not(fingerprint('turn/start', { input: 'x' }), fingerprint('session/resume', { input: 'x' }), 'the operation is part of it')
})

t.test('keys are scoped by tenant and session', async (t) => {
  const keys = new Set([
    idempotencyKey('a', 's1', 'k'),
    idempotencyKey('b', 's1', 'k'),
    idempotencyKey('a', 's2', 'k'),
    idempotencyKey('a', null, 'k'),
  ])
  t.equal(keys.size, 4)
})

t.test('a retry gets the first outcome without running again, and is told of it; another body under the key conflicts', async (t) => {
  const idem = new Idempotency(store())
  let runs = 0
  const run = async () => ({ n: ++runs })
  const replays: IdempotencyRecord['outcome'][] = []
  t.same(await idem.run({ key: 'k', op: 'op', body: { a: 1 }, run }), { n: 1 })
  t.same(
    await idem.run({
      key: 'k',
      op: 'op',
      body: { a: 1 },
      run,
      onReplay: async (o) => {
        replays.push(o)
      },
    }),
    { n: 1 },
  )
  t.equal(runs, 1)
  t.same(replays, [{ ok: true, value: { n: 1 } }])
  const err = await idem.run({ key: 'k', op: 'op', body: { a: 2 }, run }).catch((e: unknown) => e)
  t.match(err, { code: 'IDEMPOTENCY_CONFLICT', data: { field: 'header/idempotency-key' } })
})

t.test('a retry while the first call runs waits for it; a different body conflicts at once', async (t) => {
  const idem = new Idempotency(store())
  let release!: () => void
  let runs = 0
  const run = () => {
    runs++
    return new Promise<string>((r) => {
      release = () => r('first')
    })
  }
  const first = idem.run({ key: 'k', op: 'op', body: 1, run })
  const retry = idem.run({ key: 'k', op: 'op', body: 1, run })
  t.equal(await code(idem.run({ key: 'k', op: 'op', body: 2, run })), 'IDEMPOTENCY_CONFLICT')
  release()
  t.same([await first, await retry], ['first', 'first'])
  t.equal(runs, 1)
})

t.test('a failure is remembered only when the call did work (a turn ran); a rejected request can be retried', async (t) => {
  const idem = new Idempotency(store())
  let runs = 0
  const failTurn = async () => {
    runs++
    throw new BurrowError('PROVIDER_ERROR', 'upstream', { turn: 3 })
  }
  t.equal(await code(idem.run({ key: 'a', op: 'op', body: 1, run: failTurn })), 'PROVIDER_ERROR')
  const replay = await idem.run({ key: 'a', op: 'op', body: 1, run: failTurn }).catch((e: unknown) => e)
  t.match(replay, { code: 'PROVIDER_ERROR', message: 'upstream', data: { turn: 3, replayed: true } })
  t.equal(runs, 1, 'the failed turn is not run again')

  let tries = 0
  const invalid = async () => {
    if (++tries === 1) throw new BurrowError('INVALID_REQUEST', 'bad')
    return 'ok'
  }
  t.equal(await code(idem.run({ key: 'b', op: 'op', body: 1, run: invalid })), 'INVALID_REQUEST')
  t.equal(await idem.run({ key: 'b', op: 'op', body: 1, run: invalid }), 'ok', 'nothing was remembered: it runs again')
})

t.test('an outcome older than the TTL is forgotten', async (t) => {
  const s = store()
  const idem = new Idempotency(s, 1000)
  await s.put('k', { fingerprint: fingerprint('op', 1), created_at: Date.now() - 2000, outcome: { ok: true, value: 'old' } })
  t.equal(await idem.run({ key: 'k', op: 'op', body: 1, run: async () => 'new' }), 'new')
  t.equal(
    await idem.run({ key: 'k', op: 'op', body: 2, run: async () => 'other' }).catch((e: unknown) => (e as BurrowError).code),
    'IDEMPOTENCY_CONFLICT',
    'the new outcome is remembered',
  )
})

t.test('an outcome the store cannot remember is still answered, and reported', async (t) => {
  const failing: IdempotencyStore = {
    get: async () => undefined,
    put: async () => {
      throw new BurrowError('STORE_UNAVAILABLE')
    },
    deletePrefix: async () => {},
  }
  const reported: string[] = []
  const idem = new Idempotency(failing, undefined, (_err, key) => reported.push(key))
  t.equal(await idem.run({ key: 'k', op: 'op', body: 1, run: async () => 'done' }), 'done')
  t.same(reported, ['k'])
})
