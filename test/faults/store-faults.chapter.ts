// The store fault chapter, written once and run for every backend that can be made to refuse
// writes (LMDB with a full disk; PostgreSQL behind a proxy that is stopped): a real server process, many turns
// while the store cannot write, and what must hold — no exit, STORE_UNAVAILABLE (503) for writes,
// reads served, /readyz 503 while it lasts and 200 again by itself soon after, the session whose
// write failed takes its next turn, and nothing acknowledged is lost across a restart.
import { Api, sleep } from '../helpers/harness.js'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { spawnServer, type ChildServer } from '../helpers/child-server.js'

export interface FaultBackend {
  name: string
  /** The server's store settings (and a data dir, if it has one). */
  env: Record<string, string>
  /** Makes the running server's store refuse writes (the disk is full / the database is gone). */
  breakStore(server: ChildServer): Promise<void>
  /** Lets it write again; resolves when the condition is lifted (not when the service noticed). */
  healStore(server: ChildServer): Promise<void>
  /**
   * Whether reads that are not served from memory need the store too (a database that cannot be
   * reached, as opposed to a full disk): then they may also answer 503 `STORE_UNAVAILABLE`.
   */
  readsNeedStore?: boolean
}

/** What the chapter needs of a test: tap's Test has it; the benchmark passes a collector. */
export interface Checks {
  ok(v: any, ...rest: any[]): unknown
  equal(a: any, b: any, ...rest: any[]): unknown
  same(a: any, b: any, ...rest: any[]): unknown
  fail(...rest: any[]): unknown
  comment(...rest: any[]): unknown
  teardown(fn: () => any): unknown
}

export interface FaultRun {
  turnsWhileBroken: number
  refused: number
  exits: number
  /** ms from healStore() to the first /readyz 200 */
  recoveryMs: number
  acknowledged: number
  lost: number
}

/** Runs the chapter; `turns` is how many turns are tried while the store refuses writes (at least 100). */
export async function storeFaultChapter(t: Checks, backend: FaultBackend, turns = 100): Promise<FaultRun> {
  const fake = await startFakeLlm({ openaiKey: 'k' })
  t.teardown(() => fake.close())
  const env = { ...backend.env, OPENAI_API_KEY: 'k', OPENAI_BASE_URL: `${fake.url}/v1`, BURROW_DEFAULT_MODEL: 'offline:echo' }
  let server = await spawnServer(env)
  let exits = 0
  server.child.once('exit', (code, signal) => {
    exits++
    if (code !== 0 && signal !== 'SIGKILL')
      t.comment(
        `server exited (${code ?? signal}): ${server.stderr
          .join('')
          .split('\n')
          .filter((l) => !/^(Write error|    at |  code|}|Error: File too large)/.test(l))
          .join('\n')
          .slice(-3000)}`,
      )
  })
  t.teardown(() => {
    server.child.kill('SIGKILL')
  })
  const api = new Api(server.url)
  const ids: string[] = []
  for (let i = 0; i < 4; i++) ids.push(await api.createSession({ metadata: { i: String(i) } }))
  const acked = new Map<string, string[]>(ids.map((id) => [id, []]))
  const turn = async (id: string, input: string) => {
    const r = await api.turn(id, { input })
    if (r.status === 200) acked.get(id)!.push(input)
    return r
  }
  for (const id of ids) t.equal((await turn(id, `before ${id}`)).status, 200)

  await backend.breakStore(server)
  // Writes fail from the first one that needs room; count the turns tried from then on.
  let refused = 0
  let tried = 0
  let sawUnready = false
  const statuses = new Set<number>()
  for (let i = 0; tried < turns && i < turns * 20; i++) {
    const id = ids[i % ids.length]!
    const r = await turn(id, `during ${i} ${'x'.repeat(2000)}`)
    statuses.add(r.status)
    if (r.status === 503) {
      t.equal(r.body.code, 'STORE_UNAVAILABLE', 'a write the store refuses is STORE_UNAVAILABLE')
      refused++
    } else if (r.status !== 200) {
      t.fail(`unexpected ${r.status} ${JSON.stringify(r.body)}`)
    }
    if (refused > 0) tried++
    if (i % 10 === 0) {
      const ready = await api.get('/readyz')
      if (ready.status === 503) {
        sawUnready = true
        t.same(ready.body, { status: 'store_unavailable' })
      }
      const read = await api.get(`/v1/sessions/${id}`)
      const list = await api.get('/v1/sessions?limit=10')
      if (backend.readsNeedStore) {
        for (const r of [read, list])
          t.ok(
            r.status === 200 || (r.status === 503 && r.body.code === 'STORE_UNAVAILABLE'),
            'reads are served, or refused as STORE_UNAVAILABLE',
          )
      } else {
        t.equal(read.status, 200, 'reads are served while writes fail')
        t.equal(list.status, 200)
      }
    }
  }
  t.ok(refused > 0, `the store refused writes (${refused} of ${tried} turns)`)
  t.ok(tried >= turns, `${tried} turns tried while the store was full`)
  t.ok(sawUnready, '/readyz reported store_unavailable')
  t.equal(exits, 0, 'the process is alive')
  const created = await api.post('/v1/sessions', { model: 'offline:echo' })
  t.ok(created.status === 503 || created.status === 201, 'creating a session: refused cleanly or served')

  const t0 = Date.now()
  await backend.healStore(server)
  let recoveryMs = -1
  while (Date.now() - t0 < 15_000) {
    if ((await api.get('/readyz')).status === 200) {
      recoveryMs = Date.now() - t0
      break
    }
    await sleep(50)
  }
  t.ok(recoveryMs >= 0 && recoveryMs <= 5_000, `ready again ${recoveryMs} ms after space was freed (≤ 5 s)`)
  for (const id of ids) {
    const r = await turn(id, `after ${id}`)
    t.equal(r.status, 200, 'each session takes its next turn once the store writes again')
  }
  t.equal(exits, 0, 'no exit across the run')
  const exitsDuringRun = exits

  // Nothing acknowledged is lost: a fresh process on the same store has every acknowledged turn.
  server.child.kill('SIGKILL')
  await new Promise((r) => server.child.once('exit', r))
  server = await spawnServer(env)
  const again = new Api(server.url)
  let acknowledged = 0
  let lost = 0
  for (const id of ids) {
    const log: Array<{ seq: number; type: string; data: any }> = []
    for (;;) {
      const page = (await again.get(`/v1/sessions/${id}/event-log?after=${log.length}&limit=1000`)).body
      log.push(...page.events)
      if (page.events.length < 1000) break
    }
    const inputs = new Set(log.filter((e) => e.type === 'turn_started').map((e) => JSON.stringify(e.data.input)))
    const completed = log.filter((e) => e.type === 'turn_completed').length
    for (const input of acked.get(id)!) {
      acknowledged++
      if (![...inputs].some((s) => s.includes(input.slice(0, 40)))) lost++
    }
    t.ok(completed >= acked.get(id)!.length, 'every acknowledged turn completed in the log')
    t.ok(
      log.every((e, i) => e.seq === i + 1),
      'the log is gapless',
    )
    const view = (await again.get(`/v1/sessions/${id}`)).body
    t.equal(view.running, false)
  }
  t.equal(lost, 0, `${acknowledged} acknowledged turns, none lost`)
  return { turnsWhileBroken: tried, refused, exits: exitsDuringRun, recoveryMs, acknowledged, lost }
}
