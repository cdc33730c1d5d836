// Another tenant's session answers exactly like an unknown id — in time as well as in body: the
// tenant is checked, from a small record, before a (possibly very large) session is loaded from the store.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startBurrow } from '../../helpers/harness.js'

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]!
}

t.test('a large session of another tenant costs what an unknown id costs', async (t) => {
  const h = await startBurrow(
    { BURROW_SESSION_STORE: 'lmdb', BURROW_API_KEYS: 'ka:alpha,kb:beta', BURROW_MAX_LIVE_SESSIONS: '1', BURROW_DURABILITY: 'relaxed' },
    { token: 'ka' },
  )
  t.teardown(() => h.close())
  const big = await h.api.createSession()
  const chunk = 'z'.repeat(50_000)
  for (let i = 0; i < 60; i++) t.equal((await h.api.turn(big, { input: `${i} ${chunk}` })).status, 200)
  await h.api.createSession() // evicts the big one from memory (one live session): a read must load it
  const unknown = '01930000-0000-7000-8000-000000000000'
  const asBeta = { token: 'kb' }
  const other = await h.api.get(`/v1/sessions/${big}`, asBeta)
  const none = await h.api.get(`/v1/sessions/${unknown}`, asBeta)
  t.equal(other.status, 404)
  t.same(
    { ...other.body, request_id: 0, detail: other.body.detail.replace(big, 'ID') },
    { ...none.body, request_id: 0, detail: none.body.detail.replace(unknown, 'ID') },
    'the same body',
  )

  const times = { other: [] as number[], none: [] as number[], own: [] as number[] }
  for (let i = 0; i < 15; i++) {
    for (const [k, path, opts] of [
      ['other', big, asBeta],
      ['none', unknown, asBeta],
    ] as const) {
      const t0 = performance.now()
      await h.api.get(`/v1/sessions/${path}`, opts)
      times[k].push(performance.now() - t0)
    }
    await h.api.createSession() // keep the big session out of memory
    const t0 = performance.now()
    await h.api.get(`/v1/sessions/${big}`)
    times.own.push(performance.now() - t0)
    await h.api.createSession()
  }
  const [other_, none_, own_] = [median(times.other), median(times.none), median(times.own)]
  t.comment(`median ms: other tenant ${other_.toFixed(2)}, unknown ${none_.toFixed(2)}, owner loading it ${own_.toFixed(2)}`)
  t.ok(own_ > 4 * none_, 'loading the session is measurably slower (the test can tell)')
  t.ok(other_ < 2 * none_ + 1, "another tenant's id answers as fast as an unknown one")
})

t.test('cold, a session of another tenant with a 900 KB system prompt answers in the time of an unknown id', async (t) => {
  const env = { BURROW_SESSION_STORE: 'lmdb', BURROW_API_KEYS: 'ka:alpha,kb:beta', BURROW_DURABILITY: 'relaxed' }
  const dataDir = await mkdtemp(join(tmpdir(), 'burrow-timing-'))
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const first = await startBurrow(env, { token: 'kb', dataDir })
  const prompt = Array.from({ length: 20_000 }, (_, i) => `Rule ${i}: answer in "plain" words, ünïcode ✓ kept.\n`)
    .join('')
    .slice(0, 900_000)
  const big = await first.api.createSession({ system_prompt: prompt })
  // A restart: nothing of the session is live in the process, so each read of it goes to the store (a
  // read as another tenant never makes it live: every one of them is cold).
  await first.close()
  const h = await startBurrow(env, { token: 'ka', dataDir })
  t.teardown(() => h.close())

  const read = async (id: string): Promise<number> => {
    const t0 = performance.now()
    const r = await h.api.get(`/v1/sessions/${id}`)
    const ms = performance.now() - t0
    if (r.status !== 404) throw new Error(`expected 404, got ${r.status}`)
    return ms
  }
  for (let i = 0; i < 20; i++) await read(i % 2 === 0 ? big : randomUUID()) // warm-up: JIT, connections, pages
  const times = { foreign: [] as number[], unknown: [] as number[] }
  for (let i = 0; i < 150; i++) {
    // Interleaved, the order alternating, so drift and a slow neighbour weigh on both alike.
    if (i % 2 === 0) {
      times.foreign.push(await read(big))
      times.unknown.push(await read(randomUUID()))
    } else {
      times.unknown.push(await read(randomUUID()))
      times.foreign.push(await read(big))
    }
  }
  const [foreign, unknown] = [median(times.foreign), median(times.unknown)]
  t.comment(
    `median ms, cold: another tenant's session ${foreign.toFixed(3)}, unknown id ${unknown.toFixed(3)} (×${(foreign / unknown).toFixed(2)})`,
  )
  t.ok(foreign <= 1.3 * unknown, "another tenant's session answers within 1.3× the time of an unknown id")
  // Last (it makes the session live): the session is there, prompt and all, for its owner.
  const own = await h.api.get(`/v1/sessions/${big}`, { token: 'kb' })
  t.equal(own.body.system_prompt, prompt, 'the owner reads it')
})
