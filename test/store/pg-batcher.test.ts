// StatementBatcher (and the deadlock retry its statements run under): requests made while batches are in flight go together, at most `maxFlights`
// batches at once, never two requests of one key at once, each batch sorted by key; every request
// gets its own output, or its batch's failure.
import t from 'tap'
import { StatementBatcher } from '../../src/store/pg-batcher.js'
import { retryingDeadlocks } from '../../src/store/pg-pool.js'

interface Flight {
  keys: string[]
  finish: (err?: Error) => void
}

/** A batcher whose statement is a flight the test ends by hand; output: the key upper-cased. */
function harness(maxFlights = 2, maxBatch = 256) {
  const flights: Flight[] = []
  let inFlight = 0
  let most = 0
  const b = new StatementBatcher<string, string>(
    (keys) =>
      new Promise<string[]>((resolve, reject) => {
        inFlight++
        most = Math.max(most, inFlight)
        flights.push({
          keys,
          finish: (err) => {
            inFlight--
            if (err) reject(err)
            else resolve(keys.map((k) => k.toUpperCase()))
          },
        })
      }),
    (k) => k,
    maxFlights,
    maxBatch,
  )
  return { b, flights, most: () => most }
}

const tick = () => new Promise((r) => setImmediate(r))

t.test('requests queue behind the flights in flight and go together, sorted, each answered with its own output', async (t) => {
  const { b, flights, most } = harness(2)
  const first = b.submit('m')
  const second = b.submit('a')
  const rest = ['z', 'c', 'b'].map((k) => b.submit(k))
  t.same(
    flights.map((f) => f.keys),
    [['m'], ['a']],
    'the first two fly at once, alone',
  )
  flights[0]!.finish()
  t.equal(await first, 'M')
  await tick()
  t.same(flights[2]?.keys, ['b', 'c', 'z'], 'the rest go as one batch, sorted by key')
  flights[1]!.finish()
  flights[2]!.finish()
  t.same(await Promise.all([second, ...rest]), ['A', 'Z', 'C', 'B'])
  t.equal(most(), 2, 'never more than two in flight')
})

t.test('a key in flight waits: never two requests of one key at once, nor twice in a batch', async (t) => {
  const { b, flights } = harness(2)
  const a1 = b.submit('a')
  const a2 = b.submit('a')
  const a3 = b.submit('a')
  const c = b.submit('c')
  t.same(
    flights.map((f) => f.keys),
    [['a'], ['c']],
    'the second "a" waits, though a flight is free',
  )
  flights[0]!.finish()
  await a1
  await tick()
  t.same(flights[2]?.keys, ['a'], 'then goes alone; the third still waits')
  flights[2]!.finish()
  await a2
  await tick()
  t.same(flights[3]?.keys, ['a'])
  flights[1]!.finish()
  flights[3]!.finish()
  t.same(await Promise.all([a3, c]), ['A', 'C'])
})

t.test('a failed batch rejects each of its requests, and the next batch goes on', async (t) => {
  const { b, flights } = harness(1)
  const one = b.submit('x')
  const two = [b.submit('y'), b.submit('w')]
  flights[0]!.finish(new Error('connection lost'))
  await t.rejects(one, /connection lost/)
  await tick()
  t.same(flights[1]?.keys, ['w', 'y'])
  flights[1]!.finish(new Error('still down'))
  for (const p of two) await t.rejects(p, /still down/)
  const three = b.submit('v')
  flights[2]!.finish()
  t.equal(await three, 'V', 'and later requests are served')
})

t.test('a batch holds at most maxBatch requests; a statement answering the wrong count fails its batch', async (t) => {
  const { b, flights } = harness(1, 2)
  const all = ['a', 'b', 'c', 'd', 'e'].map((k) => b.submit(k))
  flights[0]!.finish()
  await tick()
  t.same(flights[1]?.keys, ['b', 'c'])
  flights[1]!.finish()
  await tick()
  t.same(flights[2]?.keys, ['d', 'e'])
  flights[2]!.finish()
  t.same(await Promise.all(all), ['A', 'B', 'C', 'D', 'E'])
  const short = new StatementBatcher<string, string>(
    async () => [],
    (k) => k,
  )
  await t.rejects(short.submit('q'), /a batch of 1 answered 0 results/)
})

t.test('a statement chosen as a deadlock victim runs again, three times at most; other failures are thrown at once', async (t) => {
  const deadlock = Object.assign(new Error('deadlock detected'), { code: '40P01' })
  let runs = 0
  t.equal(
    await retryingDeadlocks(async () => {
      if (++runs < 3) throw deadlock
      return 'done'
    }),
    'done',
  )
  t.equal(runs, 3, 'ran again after two deadlocks')
  runs = 0
  await t.rejects(
    retryingDeadlocks(async () => {
      runs++
      throw deadlock
    }),
    { code: '40P01' },
  )
  t.equal(runs, 4, 'the first run and three retries, then the deadlock is thrown')
  runs = 0
  await t.rejects(
    retryingDeadlocks(async () => {
      runs++
      throw Object.assign(new Error('duplicate key'), { code: '23505' })
    }),
    { code: '23505' },
  )
  t.equal(runs, 1, 'another failure is not retried')
})
