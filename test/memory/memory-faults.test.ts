// The memory store on a real full disk, in a real server process (src/bin/server.ts).
// The disk fills up for real: `prlimit --fsize` on the running server caps how large its
// files may grow, so LMDB's page writes past the cap fail (EFBIG) exactly as on a full
// disk, and raising the cap again is the space coming back.
import t from 'tap'
import { once } from 'node:events'
import { statSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { request } from 'undici'
import type { ChildServer } from '../helpers/child-server.js'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { Api, eventually } from '../helpers/harness.js'
import { spawnBareServer } from './bare-server.js'
import { hasPrlimit, limitFileSize, unlimitFileSize } from '../helpers/full-disk.js'

/** Caps the size any file of the process may grow to (bytes), or lifts the cap. */
function capFiles(server: ChildServer, bytes: number | 'unlimited'): void {
  if (bytes === 'unlimited') unlimitFileSize(server.child.pid!)
  else limitFileSize(server.child.pid!, bytes)
}

/** The size of the memory store's LMDB file now: capping there means no page can be appended. */
const memoryDbSize = (dataDir: string) => statSync(join(dataDir, 'memory', 'lmdb', 'data.mdb')).size

// lmdb-js rejects one internal promise nobody can observe on each failed commit; the server's
// process guard ignores exactly that one (src/app/process-guard.ts), so the child runs with
// Node's default: any other unhandled rejection would crash it (unhandledRejections checks too).
const NODE_ARGS: string[] = []
const spawn = (env: Record<string, string>) => spawnBareServer(env, NODE_ARGS)

/** POST /v1/memory without the OpenAPI check of Api: the route's document does not list 503 yet. */
async function addRaw(url: string, body: unknown): Promise<{ status: number; type: string; body: any }> {
  const res = await request(`${url}/v1/memory`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  return { status: res.statusCode, type: String(res.headers['content-type']), body: await res.body.json() }
}

/**
 * The unhandled rejections the child reported (Node prints each as an
 * `UnhandledPromiseRejectionWarning: <Error: message>` line): all must be lmdb-js's
 * internal one, never one of ours (which would carry the errno error or our own).
 */
function unhandledRejections(stderr: string[]): string[] {
  return [...stderr.join('').matchAll(/UnhandledPromiseRejectionWarning: (Error: [^\n]*)/g)].map((m) => m[1]!)
}

async function stop(server: ChildServer): Promise<number | null> {
  const exit = once(server.child, 'exit')
  server.child.kill('SIGTERM')
  const [code] = await exit
  return code as number | null
}

const filler = (marker: string) => `Entry ${marker} of the fill: ${'the quick brown fox jumps over the lazy dog '.repeat(80)}`

t.test(
  'a full disk: adds answer 503 STORE_UNAVAILABLE, searches work, nothing acknowledged is lost, adds work again once there is room',
  { skip: !hasPrlimit && 'needs prlimit' },
  async (t) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'burrow-mem-full-'))
    t.teardown(() => rm(dataDir, { recursive: true, force: true }))
    const env = { BURROW_MEMORY_STORE: 'hnsw', BURROW_DURABILITY: 'fsync', BURROW_DATA_DIR: dataDir }
    let server = await spawn(env)
    t.teardown(() => {
      if (server.child.exitCode === null) server.child.kill('SIGKILL')
    })
    const acknowledged: string[] = []
    const refused: string[] = []
    const add = async (marker: string, big: boolean) => {
      const r = await addRaw(
        server.url,
        big
          ? Array.from({ length: 10 }, (_, i) => ({ content: `${filler(`${marker}`)} part ${i}` }))
          : [{ content: `Acknowledged fact ${marker}.` }],
      )
      if (r.status === 201) acknowledged.push(marker)
      else refused.push(marker)
      return r
    }
    for (let i = 0; i < 3; i++) t.equal((await add(`ACK-${1000 + i}`, false)).status, 201)

    capFiles(server, memoryDbSize(dataDir))
    let first: Awaited<ReturnType<typeof add>> | undefined
    for (let i = 0; i < 20 && !first; i++) {
      const r = await add(`FULL-${2000 + i}`, true)
      if (r.status !== 201) first = r
    }
    t.ok(first, 'the disk filled up')
    t.equal(first!.status, 503)
    t.match(first!.type, /^application\/problem\+json/)
    t.match(first!.body, { status: 503, code: 'STORE_UNAVAILABLE', title: 'Store unavailable' })
    for (let i = 0; i < 3; i++)
      t.match(await add(`FULL-${3000 + i}`, true), { status: 503, body: { code: 'STORE_UNAVAILABLE' } }, 'and stays full')

    const api = new Api(server.url)
    const read = await api.get('/v1/memory/search?q=ACK-1001')
    t.equal(read.status, 200, 'searches work on a full disk')
    t.match(read.body.results[0].content, /ACK-1001/)
    t.equal(server.child.exitCode, null, 'the process is alive')

    capFiles(server, 'unlimited')
    const after = await add('AFTER-4000', false)
    t.equal(after.status, 201, 'with room again, adds work without a restart')
    t.match((await api.get('/v1/memory/search?q=AFTER-4000')).body.results[0].content, /AFTER-4000/)
    t.equal(await stop(server), 0, 'a clean stop')
    const rejections = unhandledRejections(server.stderr)
    // The guard takes lmdb-js's internal one; nothing is left for Node to report.
    t.same(rejections, [], 'no unhandled rejection reached Node')

    server = await spawn(env)
    const again = new Api(server.url)
    for (const marker of acknowledged) {
      const hits = (await again.get(`/v1/memory/search?q=${marker}&limit=20`)).body.results.filter((r: any) => r.content.includes(marker))
      t.ok(hits.length >= 1, `acknowledged ${marker} is there after a restart`)
    }
    for (const marker of refused) {
      const hits = (await again.get(`/v1/memory/search?q=${marker}&limit=20`)).body.results.filter((r: any) => r.content.includes(marker))
      t.same(hits, [], `refused ${marker} left nothing behind`)
    }
    t.equal(await stop(server), 0)
  },
)

t.test(
  'compaction on a full disk: turns go on, the discarded messages are indexed once there is room',
  { skip: !hasPrlimit && 'needs prlimit' },
  async (t) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'burrow-mem-full-idx-'))
    const fake = await startFakeLlm({ openaiKey: 'sk-test' })
    t.teardown(async () => {
      await fake.close()
      await rm(dataDir, { recursive: true, force: true })
    })
    fake.autoSummaries = true
    const server = await spawn({
      BURROW_MEMORY_STORE: 'hnsw',
      BURROW_COMPACTION: 'on',
      BURROW_DURABILITY: 'fsync',
      BURROW_DATA_DIR: dataDir,
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: `${fake.url}/v1`,
    })
    t.teardown(() => {
      if (server.child.exitCode === null) server.child.kill('SIGKILL')
    })
    const api = new Api(server.url)
    const id = await api.createSession({
      model: 'openai:gpt-4o-mini',
      memory: true,
      compaction: { auto_compact_threshold: 150, recent_turn_budget: 1, min_turns_between_compactions: 0 },
    })

    capFiles(server, memoryDbSize(dataDir))
    const facts = [
      'The boiler in the annex was serviced by Quentin Marchetti.',
      'The rooftop antenna is registered as call sign QX7-ANTENNA.',
    ]
    for (const [i, f] of [
      ...facts,
      'filler one to push the history along',
      'filler two to push the history along',
      'filler three',
    ].entries()) {
      fake.enqueue({ text: `Noted ${i}.` })
      const r = await api.turn(id, { input: f })
      t.equal(r.status, 200)
      t.equal(r.body.status, 'completed', 'the turn is not failed by memory')
    }
    const parked = await eventually(
      () => server.lines.find((l) => l.msg === 'memory is not writable: the discarded messages are indexed once it is'),
      10_000,
    )
    t.match(parked, { level: 40, session_id: id, err: { code: 'STORE_UNAVAILABLE' } })
    t.same((await api.get('/v1/memory/search?q=QX7-ANTENNA')).body.results, [], 'not indexed while the disk is full')

    capFiles(server, 'unlimited')
    const hit = await eventually(
      async () => (await api.get('/v1/memory/search?q=QX7-ANTENNA')).body.results.find((r: any) => r.content.includes('QX7-ANTENNA')),
      15_000,
    )
    t.match(hit, { session_id: id }, 'indexed once there is room, with its provenance')
    t.equal(await stop(server), 0)
    t.same(unhandledRejections(server.stderr), [], 'nothing went unhandled')
  },
)

t.test(
  'deleting a session while memory cannot write: refused whole, and done whole once there is room',
  { skip: !hasPrlimit && 'needs prlimit' },
  async (t) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'burrow-mem-full-del-'))
    t.teardown(() => rm(dataDir, { recursive: true, force: true }))
    const server = await spawn({
      BURROW_SESSION_STORE: 'lmdb',
      BURROW_MEMORY_STORE: 'hnsw',
      BURROW_DURABILITY: 'fsync',
      BURROW_DATA_DIR: dataDir,
    })
    t.teardown(() => {
      if (server.child.exitCode === null) server.child.kill('SIGKILL')
    })
    const api = new Api(server.url)
    const id = await api.createSession({ memory: true })
    // The memory file grows well past the session store's, so capping at its size leaves the session store room.
    for (let i = 0; i < 8; i++)
      t.equal(
        (
          await addRaw(
            server.url,
            Array.from({ length: 10 }, (_, j) => ({ content: `${filler(`SESS-${i}`)} ${j}`, session_id: id })),
          )
        ).status,
        201,
      )
    capFiles(server, memoryDbSize(dataDir))
    let full = false
    for (let i = 0; i < 30 && !full; i++)
      full =
        (
          await addRaw(
            server.url,
            Array.from({ length: 10 }, (_, j) => ({ content: `${filler(`FILL-${i}`)} ${j}` })),
          )
        ).status === 503
    t.ok(full, 'memory is full')

    const refused = await request(`${server.url}/v1/sessions/${id}`, { method: 'DELETE' })
    t.equal(refused.statusCode, 503)
    t.match(await refused.body.json(), { code: 'STORE_UNAVAILABLE' })
    t.equal((await api.get(`/v1/sessions/${id}`)).status, 200, 'the session is still there to delete again')

    capFiles(server, 'unlimited')
    t.equal((await api.delete(`/v1/sessions/${id}`)).status, 204, 'deleted once there is room')
    t.equal((await api.get(`/v1/sessions/${id}`)).status, 404)
    const left = (await api.get(`/v1/memory/search?q=SESS&scope=tenant&limit=20`)).body.results.filter((r: any) => r.session_id === id)
    t.same(left, [], 'and none of its memories outlive it')
    t.equal(await stop(server), 0)
  },
)
