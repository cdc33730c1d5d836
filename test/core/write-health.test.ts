import t from 'tap'
import { BurrowError } from '../../src/core/errors.js'
import { PROBE_INTERVAL_MS, WriteHealth } from '../../src/core/write-health.js'

t.test('unhealthy after a failed write, healthy again after a probe or a write, probing at most once per interval', async (t) => {
  let room = false
  let probes = 0
  const changes: boolean[] = []
  const h = new WriteHealth(
    async () => {
      probes++
      if (!room) throw new Error('ENOSPC')
    },
    (w) => changes.push(w),
  )
  t.equal(h.writable, true)
  t.equal(probes, 0, 'a healthy store never probes')
  const err = await h
    .run(async () => {
      throw Object.assign(new Error('disk full'), { code: 'ENOSPC' })
    }, 'the thing')
    .catch((e: unknown) => e)
  t.type(err, BurrowError)
  t.equal((err as BurrowError).code, 'STORE_UNAVAILABLE')
  t.match((err as BurrowError).message, /^the thing could not be stored: ENOSPC/)
  t.equal(h.writable, false, 'a probe starts, the answer is the state now')
  await new Promise((r) => setImmediate(r))
  t.equal(probes, 1)
  t.equal(h.writable, false)
  t.equal(probes, 1, 'not again within the interval')
  room = true
  await new Promise((r) => setTimeout(r, PROBE_INTERVAL_MS + 20))
  t.equal(h.writable, false, 'this check starts the probe that will succeed')
  await new Promise((r) => setImmediate(r))
  t.equal(probes, 2)
  t.equal(h.writable, true, 'healthy once a probe succeeded')
  t.same(changes, [false, true])
  h.failed(new Error('again'))
  await h.run(async () => 1, 'x')
  t.equal(h.writable, true, 'a successful write heals too')
  h.close()
  h.failed(new Error('closed'))
  t.equal(h.writable, false)
  await new Promise((r) => setTimeout(r, 10))
  t.equal(probes, 2, 'no probes once closed')
})
