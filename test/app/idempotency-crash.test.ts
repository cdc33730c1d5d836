// kill -9 under load with an Idempotency-Key on every request, many times: every request a kill
// cut is retried with its key and body, and each runs once — its outcome committed with its work,
// so a retry finds both or neither. Turns (new input, and tool_results continuing a paused turn)
// are counted in the event log, where each run's `turn_started` names its key; memory adds and
// session creations are counted by the key each one carries in its metadata. On LMDB (one process,
// restarted) and on PostgreSQL with two replicas (one killed, its cut requests retried on the other).
import t, { type Test } from 'tap'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Api, sleep, type ApiResponse } from '../helpers/harness.js'
import { spawnServer, type ChildServer } from '../helpers/child-server.js'
import { tempDatabase } from '../helpers/pg.js'
import { sameAnswer } from '../helpers/answers.js'
import { rounds } from '../helpers/thoroughness.js'

// kill -9 rounds on LMDB (half as many on PostgreSQL): 2 in npm test, 6 in npm run test:full.
const ITERATIONS = rounds(2, 6, process.env.IDEMPOTENCY_CRASH_ITERATIONS)
// Server restarts and retried load, seconds a round on a busy two-core machine: its own bound, growing with the rounds.
t.setTimeout(120_000 + ITERATIONS * 30_000)
const SESSIONS = 6
const TOOLS = [{ name: 'lookup', input_schema: { type: 'object' } }]

/** One request of the load: where it went, what it sent, and under which key. */
interface Sent {
  kind: 'turn' | 'results' | 'memory' | 'create'
  session: string | null
  path: string
  body: unknown
  key: string
}

/** What a request was answered, first and on retries. */
interface Answered {
  sent: Sent
  first?: ApiResponse
  retries: ApiResponse[]
}

t.test('kill -9 between work and answer: every retry answers the first outcome or runs once (LMDB)', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'burrow-idem-crash-'))
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const env = { BURROW_SESSION_STORE: 'lmdb', BURROW_MEMORY_STORE: 'hnsw', BURROW_DATA_DIR: dataDir, LOG_LEVEL: 'info' }
  await crashRun(t, [env], ITERATIONS, 7)
})

t.test('kill -9 of one of two replicas: its cut requests retried on the other run once (PostgreSQL)', async (t) => {
  const db = await tempDatabase(t, 'idemcrash')
  const dirs = [await mkdtemp(join(tmpdir(), 'burrow-idem-a-')), await mkdtemp(join(tmpdir(), 'burrow-idem-b-'))]
  t.teardown(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))))
  const env = (i: number) => ({
    BURROW_SESSION_STORE: 'postgres',
    BURROW_MEMORY_STORE: 'postgres',
    BURROW_DATABASE_URL: db.url,
    BURROW_PG_POOL_SIZE: '3',
    BURROW_DATA_DIR: dirs[i]!,
    BURROW_REPLICA_ID: `idem-${i}`,
    BURROW_LEASE_MS: '1000',
    BURROW_LEASE_LINGER_MS: '0',
    LOG_LEVEL: 'info',
  })
  await crashRun(t, [env(0), env(1)], Math.ceil(ITERATIONS / 2), 11)
})

async function crashRun(t: Test, envs: Array<Record<string, string>>, iterations: number, seed: number): Promise<void> {
  const memory = envs[0]!.BURROW_MEMORY_STORE !== 'off'
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31
  const servers: ChildServer[] = []
  for (const env of envs) servers.push(await spawnServer(env))
  t.teardown(async () => {
    for (const s of servers) if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL')
  })
  const api = (i: number) => new Api(servers[i]!.url)
  const ids: string[] = []
  for (let i = 0; i < SESSIONS; i++) {
    const r = await api(0).post('/v1/sessions', { model: 'offline:echo', tools: TOOLS })
    ids.push(r.body.session_id)
  }
  const all: Answered[] = []
  let n = 0

  for (let it = 0; it < iterations; it++) {
    const victim = Math.floor(rnd() * servers.length)
    if (process.env.IDEM_DEBUG) console.error(`it ${it} start`)
    const cut: Answered[] = []
    let stop = false
    // Sends on a random live server; a request whose connection the kill broke is cut.
    const send = async (sent: Sent): Promise<ApiResponse | undefined> => {
      const a: Answered = { sent, retries: [] }
      all.push(a)
      try {
        a.first = await api(Math.floor(rnd() * servers.length)).post(sent.path, sent.body, { headers: { 'idempotency-key': sent.key } })
        return a.first
      } catch {
        cut.push(a)
        return undefined
      }
    }
    // A session's requests go one after another; a worker ends at its first cut request (its session's last).
    const workers = ids.map(async (id) => {
      while (!stop) {
        const r = rnd()
        const key = `k${it}-${n++}`
        if (r < 0.35) {
          const paused = await send({
            kind: 'turn',
            session: id,
            path: `/v1/sessions/${id}/turns`,
            body: { input: '/tool lookup {"q":1}' },
            key,
          })
          if (!paused) return
          if (paused.status !== 200 || paused.body.status !== 'requires_action') continue
          const results = paused.body.tool_calls.map((c: { id: string }) => ({ tool_call_id: c.id, content: 'found' }))
          if (
            !(await send({
              kind: 'results',
              session: id,
              path: `/v1/sessions/${id}/turns`,
              body: { tool_results: results },
              key: `${key}r`,
            }))
          )
            return
        } else if (r < 0.5 && memory) {
          if (
            !(await send({ kind: 'memory', session: null, path: '/v1/memory', body: [{ content: `fact ${key}`, metadata: { key } }], key }))
          )
            return
        } else if (r < 0.55) {
          if (
            !(await send({ kind: 'create', session: null, path: '/v1/sessions', body: { model: 'offline:echo', metadata: { key } }, key }))
          )
            return
        } else {
          if (!(await send({ kind: 'turn', session: id, path: `/v1/sessions/${id}/turns`, body: { input: `hello ${key}` }, key }))) return
        }
      }
    })
    await sleep(200 + rnd() * 400)
    const dead = servers[victim]!
    const exit = once(dead.child, 'exit')
    dead.child.kill('SIGKILL')
    await exit
    await sleep(5) // requests the other replica was answering finish
    stop = true
    await Promise.all(workers)

    // Retried where they can be: on the other replica at once, or on the restarted process.
    const live = servers.length > 1 ? 1 - victim : victim
    if (servers.length === 1) servers[victim] = await spawnServer(envs[victim]!)
    for (const a of cut) a.retries.push(await retry(api(live), a.sent))
    if (servers.length > 1) servers[victim] = await spawnServer(envs[victim]!)
    // A retry again, and one of an answered request, on another process: the same answer.
    for (const a of cut) a.retries.push(await retry(api(Math.floor(rnd() * servers.length)), a.sent))
    for (const a of all.filter((x) => x.first && x.retries.length === 0 && rnd() < 0.05))
      a.retries.push(await retry(api(Math.floor(rnd() * servers.length)), a.sent))
    // Paused turns left by the cut (their retries answered the pause) end, so the next load starts clean.
    for (const id of ids) {
      const view = (await api(0).get(`/v1/sessions/${id}`)).body
      if (view.pending_tool_calls.length > 0) await api(0).post(`/v1/sessions/${id}/interrupt`)
    }
    t.ok(cut.length > 0, `iteration ${it}: the kill cut ${cut.length} requests`)
    if (process.env.IDEM_DEBUG) console.error(`it ${it} done, ${all.length} sent`)
  }

  // Counted where the work lands: each key's turn_started in the logs, its memory entries, its sessions.
  const runs = new Map<string, Array<{ session: string; seq: number; turn: number }>>()
  for (const id of ids) {
    for (const e of await eventLog(api(0), id)) {
      const key = e.type === 'turn_started' ? e.data.idempotency?.key : undefined
      if (key) runs.set(key, [...(runs.get(key) ?? []), { session: id, seq: e.seq, turn: e.turn }])
    }
  }
  const entries = memory ? await listAll(api(0), '/v1/memory') : []
  const sessions = await listAll(api(0), '/v1/sessions')
  const counted = (a: Answered): number => {
    const key = a.sent.key
    if (a.sent.kind === 'memory') return entries.filter((e) => e.metadata.key === key).length
    if (a.sent.kind === 'create') return sessions.filter((s) => s.metadata.key === key).length
    return runs.get(key)?.length ?? 0
  }
  const retried = all.filter((a) => a.retries.length > 0)
  const cutCount = all.filter((a) => !a.first).length
  t.ok(cutCount >= iterations, `${cutCount} requests were cut and retried`)
  let doubles = 0
  for (const a of all) {
    const ran = counted(a)
    const answers = [...(a.first ? [a.first] : []), ...a.retries]
    const worked = answers.some((r) => r.status < 300 || typeof r.body?.data?.turn === 'number')
    if (ran > 1) doubles++
    t.ok(ran <= 1, `${a.sent.kind} ${a.sent.key} ran ${ran} time(s)`)
    if (worked) t.equal(ran, 1, `${a.sent.kind} ${a.sent.key}: answered as done, and done once`)
    // Every answer after the first that did work is the same answer.
    const done = answers.filter((r) => r.status < 300 || typeof r.body?.data?.turn === 'number')
    for (const r of done.slice(1)) {
      t.equal(r.status, done[0]!.status, `${a.sent.key}: a retry answers the first status`)
      t.same(sameAnswer(r.body), sameAnswer(done[0]!.body), `${a.sent.key}: a retry answers the first body`)
    }
    // A turn's answer names the run its key is on in the log.
    const run = runs.get(a.sent.key)?.[0]
    const last = done[0]?.body
    if (run && last && (a.sent.kind === 'turn' || a.sent.kind === 'results')) {
      const turn = last.turn ?? last.data?.turn
      const first = last.first_seq ?? last.data?.first_seq
      t.same([turn, first], [run.turn, run.seq], `${a.sent.key}: the answer is the run in the log`)
    }
  }
  t.equal(doubles, 0, `no request ran twice (${retried.length} retried, ${all.length} sent)`)
}

/** Retries a cut request until it is answered with something other than "still running". */
async function retry(api: Api, sent: Sent): Promise<ApiResponse> {
  for (let i = 0; ; i++) {
    const r = await api.post(sent.path, sent.body, { headers: { 'idempotency-key': sent.key } })
    // Still running elsewhere (its claim or its session's lease held by a replica not yet known dead): asked again.
    const reason = r.body?.data?.reason
    const busy =
      r.status === 409 && r.body?.code === 'SESSION_BUSY' && (reason === 'idempotency_key_in_progress' || reason === 'leased_elsewhere')
    if (process.env.IDEM_DEBUG) console.error('retry', sent.kind, sent.key, r.status, r.body?.code, r.body?.detail)
    if (busy && i === 0 && process.env.IDEM_DEBUG && sent.session)
      console.error(
        (await eventLog(api, sent.session))
          .map((e) => `${e.seq} t${e.turn} ${e.type} ${e.data.idempotency?.key ?? ''} ${e.data.reason ?? ''}`)
          .join('\n'),
      )
    if (!busy || i >= 60) return r
    await sleep(100)
  }
}

async function eventLog(api: Api, id: string): Promise<any[]> {
  const out: any[] = []
  for (let after = 0; ;) {
    const page = (await api.get(`/v1/sessions/${id}/event-log?after=${after}&limit=500`)).body
    out.push(...page.events)
    if (page.events.length === 0 || after >= page.last_seq) return out
    after = page.events.at(-1).seq
    if (after >= page.last_seq) return out
  }
}

async function listAll(api: Api, path: string): Promise<any[]> {
  const out: any[] = []
  for (let cursor: string | null = null; ;) {
    const page: any = (await api.get(`${path}?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)).body
    out.push(...page.items)
    cursor = page.next_cursor
    if (!cursor) return out
  }
}
