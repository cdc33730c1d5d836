// The tenant stream (GET /v1/events) on a store with a tenant journal (LMDB, PostgreSQL): ids in
// commit order, Last-Event-ID resumes with no gap and no duplicate — after a disconnect, across a
// restart — and a resume it cannot serve is said (stream_truncated), never a silent gap.
import t, { type Test } from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Api, startBurrow, type Harness } from '../../helpers/harness.js'
import { tempDatabase } from '../../helpers/pg.js'
import type { SseFrame } from '../../helpers/sse-client.js'

const KEYS = { BURROW_API_KEYS: 'key-a:tenantA,key-b:tenantB' }

/** Each store with a tenant journal: its configuration for one test (a database of its own on PostgreSQL). */
const STORES: Array<[string, (t: Test) => Promise<Record<string, string>>]> = [
  ['lmdb', async () => ({ BURROW_SESSION_STORE: 'lmdb' })],
  [
    'postgres',
    async (t) => ({
      BURROW_SESSION_STORE: 'postgres',
      BURROW_DATABASE_URL: (await tempDatabase(t, 'tenant_stream')).url,
      BURROW_MEMORY_STORE: 'off',
    }),
  ],
]

/** Every stored event of the sessions, as `session:seq`, in seq order per session. */
async function stored(api: Api, ids: string[]): Promise<Set<string>> {
  const out = new Set<string>()
  for (const id of ids)
    for (const e of (await api.get(`/v1/sessions/${id}/event-log?after=0&limit=1000`)).body.events) out.add(`${id}:${e.seq}`)
  return out
}

const key = (f: SseFrame) => `${f.data.session_id}:${f.data.seq}`
const storedFrames = (frames: SseFrame[]) => frames.filter((f) => f.id !== undefined)

/** Checks a run of frames: ids strictly increase, each session's seqs follow on from `from`. */
function checkOrder(t: Test, frames: SseFrame[], from: Map<string, number> = new Map()): Map<string, number> {
  let last = -1
  const seqs = new Map(from)
  for (const f of storedFrames(frames)) {
    const id = Number(f.id)
    t.ok(id > last, `ids increase (${id} after ${last})`)
    last = id
    const prev = seqs.get(f.data.session_id) ?? 0
    if (f.data.seq !== prev + 1) t.fail(`session ${f.data.session_id}: seq ${f.data.seq} after ${prev}`)
    seqs.set(f.data.session_id, f.data.seq)
  }
  return seqs
}

for (const [store, storeEnv] of STORES)
  t.test(store, async (t) => {
    t.test('resumes after a disconnect and across a restart, with no gap and no duplicate', async (t) => {
      const ENV = { ...(await storeEnv(t)), ...KEYS }
      const dataDir = await mkdtemp(join(tmpdir(), 'burrow-tenant-stream-'))
      t.teardown(() => rm(dataDir, { recursive: true, force: true }))
      let h: Harness = await startBurrow(ENV, { dataDir })
      t.teardown(() => h.close())
      let a = new Api(h.url, 'key-a')
      const b = new Api(h.url, 'key-b')

      const s = await a.sse('/v1/events?after=0')
      const one = await a.createSession()
      const two = await a.createSession()
      const theirs = await b.createSession()
      await Promise.all([a.turn(one, { input: 'first' }), a.turn(two, { input: 'second' }), b.turn(theirs, { input: 'other tenant' })])
      await a.turn(one, { input: 'third' })
      const frames = await s.until((f) => f.event === 'turn_completed' && f.data.session_id === one && f.data.turn === 2)
      s.close()
      const seen = checkOrder(t, frames)
      t.notOk(
        storedFrames(frames).some((f) => f.data.session_id === theirs),
        "another tenant's events never appear",
      )
      t.same(new Set(storedFrames(frames).map(key)), await stored(a, [one, two]), 'after=0: every stored event of the tenant, once')
      t.equal(storedFrames(frames).length, (await stored(a, [one, two])).size, 'no duplicate')

      // Disconnected: more commits, then a resume from the last id seen.
      const lastId = storedFrames(frames).at(-1)!.id!
      await a.turn(two, { input: 'while away' })
      const three = await a.createSession()
      const resumed = await a.sse('/v1/events', { headers: { 'last-event-id': lastId } })
      await a.turn(three, { input: 'live again' })
      const after = await resumed.until((f) => f.event === 'turn_completed' && f.data.session_id === three)
      resumed.close()
      const seen2 = checkOrder(t, after, seen)
      const all = await stored(a, [one, two, three])
      t.same(
        new Set([...storedFrames(frames), ...storedFrames(after)].map(key)),
        all,
        'the resume brings exactly what was missed, then live',
      )
      t.notOk(
        after.some((f) => f.event === 'stream_truncated'),
        'no truncation',
      )

      // Across a restart on the same data directory and port.
      const lastId2 = storedFrames(after).at(-1)!.id!
      const port = new URL(h.url).port
      await h.close()
      h = await startBurrow({ ...ENV, PORT: port }, { dataDir })
      a = new Api(h.url, 'key-a')
      await a.turn(one, { input: 'after the restart' })
      const again = await a.sse('/v1/events', { headers: { 'last-event-id': lastId2 } })
      const restarted = await again.until((f) => f.event === 'turn_completed' && f.data.session_id === one)
      again.close()
      checkOrder(t, restarted, seen2)
      t.same(
        storedFrames(restarted).map((f) => f.data.seq),
        [...(await stored(a, [one]))].map((k) => Number(k.split(':')[1])).filter((seq) => seq > seen2.get(one)!),
        'what was committed after the restart, from where the reader stood',
      )
      t.ok(Number(storedFrames(restarted)[0]!.id) > Number(lastId2), 'ids keep increasing across the restart')

      // Without Last-Event-ID: live from now. A position this journal never gave out: said so.
      const live = await a.sse('/v1/events')
      await a.turn(two, { input: 'live only' })
      const liveFrames = await live.until((f) => f.event === 'turn_completed' && f.data.session_id === two)
      live.close()
      t.same(
        storedFrames(liveFrames).map((f) => f.event),
        ['turn_started', 'assistant_message', 'turn_completed'],
        'only what happens after it opens',
      )
      const future = await a.sse('/v1/events', { headers: { 'last-event-id': '999999999999' } })
      const note = await future.next()
      future.close()
      t.equal(note?.event, 'stream_truncated')
      t.equal(note?.data.data.reason, 'unknown_position')
    })

    t.test('text deltas reach the tenant stream live; a slow start still gets every stored event', async (t) => {
      const h = await startBurrow(await storeEnv(t), { fake: true })
      t.teardown(() => h.close())
      const id = await h.api.createSession({ model: 'openai:gpt-4o-mini' })
      const s = await h.api.sse('/v1/events')
      h.fake.enqueue({ text: 'one two three four five', chunkSize: 4, delayMs: 10 })
      await h.api.turn(id, { input: 'stream it' })
      const frames = await s.until((f) => f.event === 'turn_completed')
      s.close()
      t.match(
        frames
          .filter((f) => f.event === 'text_delta')
          .map((f) => f.data.data.text)
          .join(''),
        'one two three four five',
      )
      t.ok(
        frames.filter((f) => f.event === 'text_delta').every((f) => f.id === undefined),
        'deltas carry no id',
      )
    })

    t.test("a deleted session's events are not replayed, even to a reader right after the deletion", async (t) => {
      const h = await startBurrow(await storeEnv(t))
      t.teardown(() => h.close())
      const gone = await h.api.createSession()
      const kept = await h.api.createSession()
      await h.api.turn(gone, { input: 'soon deleted' })
      await h.api.turn(kept, { input: 'stays' })
      const first = await h.api.sse('/v1/events?after=0')
      const before = await first.until((f) => f.event === 'turn_completed' && f.data.session_id === kept)
      first.close()
      t.ok(
        before.some((f) => f.data.session_id === gone),
        'read once while it existed',
      )
      t.equal((await h.api.delete(`/v1/sessions/${gone}`)).status, 204)
      const again = await h.api.sse('/v1/events?after=0')
      const after = await again.until((f) => f.event === 'turn_completed' && f.data.session_id === kept)
      again.close()
      t.notOk(
        after.some((f) => f.data.session_id === gone),
        'not after it was deleted',
      )
      t.same(
        storedFrames(after).map(key),
        storedFrames(before)
          .filter((f) => f.data.session_id === kept)
          .map(key),
      )
    })
  })
