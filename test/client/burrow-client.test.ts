// The typed HTTP client against the real server, in every capability mode.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { BurrowClient, BurrowError, type EventEnvelope } from '../../src/client/index.js'
import { SUMMARY_PREFIX } from '../../src/core/compactor.js'
import { MODES, startBurrow } from '../helpers/harness.js'
import { closeHarness } from './close.js'

const MODEL = 'openai:gpt-4o-mini'
const CAPS = { BURROW_MEMORY_STORE: 'hnsw', BURROW_COMPACTION: 'on', BURROW_DURABILITY: 'relaxed' }
const WEATHER = { name: 'get_weather', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } } } }

/** Runs `fn` and returns the BurrowError it throws (failing the test if it does not). */
async function refusal(fn: () => Promise<unknown>): Promise<BurrowError> {
  try {
    await fn()
  } catch (err) {
    if (err instanceof BurrowError) return err
    throw err
  }
  throw new Error('expected a BurrowError')
}

for (const mode of MODES)
  t.test(`${mode.name}: the typed client`, async (t) => {
    const h = await startBurrow({ ...mode.env, ...CAPS }, { fake: true })
    t.teardown(() => closeHarness(h))
    const client = new BurrowClient({ baseUrl: `${h.url}/` })

    t.test('every operation', async (t) => {
      const caps = await client.getCapabilities()
      t.equal(caps.session_store, mode.persistent)
      t.equal(caps.memory_store, true)
      const created = await client.createSession({
        model: 'offline:echo',
        metadata: { team: 'client' },
        compaction: { recent_turn_budget: 1, min_turns_between_compactions: 0 },
      })
      const id = created.session_id
      t.equal(created.model, 'offline:echo')
      t.same(created.metadata, { team: 'client' })

      const r = await client.startTurn(id, { input: 'hello' })
      t.match(r, { session_id: id, turn: 1, status: 'completed', output_text: 'echo: hello', first_seq: 2, last_seq: 4 })
      await client.startTurn(id, { input: 'second' })
      await client.startTurn(id, { input: 'third' })

      const page = await client.listEvents(id, { after: 0, limit: 3 })
      t.same(
        page.events.map((e) => e.seq),
        [1, 2, 3],
      )
      t.equal(page.last_seq, 10)
      t.equal(page.truncated, false)
      t.same(
        (await client.listEvents(id, { after: 9 })).events.map((e) => e.type),
        ['turn_completed'],
      )

      t.same(await client.interrupt(id), { session_id: id, interrupted: false, turn: null })
      const compacted = await client.compact(id)
      t.equal(compacted.session_id, id)
      t.equal(compacted.compacted, true)

      const note = await client.putNote(id, 'goal', 'ship the client')
      t.match(note, { key: 'goal', value: 'ship the client' })
      t.same(
        (await client.listNotes(id)).map((n) => [n.key, n.value]),
        [['goal', 'ship the client']],
      )
      t.equal((await client.getNote(id, 'goal')).value, 'ship the client')
      t.equal(await client.deleteNote(id, 'goal'), true)
      t.equal(await client.deleteNote(id, 'goal'), false, 'a missing note deletes as false')
      t.same(await client.listNotes(id), [])

      const added = await client.addMemory([{ content: 'The quarterly report is due on the third Monday.', session_id: id }])
      t.equal(added.ids.length, 1)
      const found = await client.searchMemory({ q: 'when is the quarterly report due', limit: 3, session_id: id, scope: 'session' })
      t.match(found.results[0], { content: 'The quarterly report is due on the third Monday.', session_id: id })

      if (mode.persistent) {
        const view = await client.read(id)
        t.match(view, { session_id: id, status: 'active', turn_count: 3, metadata: { team: 'client' } })
        const resumed = await client.resume(id, { input: 'again' })
        t.match(resumed, { turn: 4, status: 'completed', output_text: 'echo: again' })
        const listed = await client.list({ limit: 100 })
        t.ok(listed.items.some((s) => s.session_id === id))
        t.same(
          (await client.list({ limit: 100, status: 'archived' })).items.filter((s) => s.session_id === id),
          [],
        )
        t.equal(await client.archive(id), undefined)
        t.equal((await client.read(id)).status, 'archived')
        t.equal((await refusal(() => client.startTurn(id, { input: 'no' }))).code, 'SESSION_ARCHIVED')
        t.equal(await client.delete(id), undefined)
        t.equal((await refusal(() => client.read(id))).code, 'SESSION_NOT_FOUND')
      } else {
        for (const op of [
          () => client.read(id),
          () => client.list(),
          () => client.archive(id),
          () => client.delete(id),
          () => client.resume(id, { input: 'x' }),
        ]) {
          const e = await refusal(op)
          t.equal(e.code, 'SESSION_PERSISTENCE_DISABLED')
          t.equal(e.message, "Session persistence is disabled (build without 'session-store').")
          t.equal(e.status, 501)
        }
      }
    })

    t.test('a read-only token from createToken reads and is refused writes with FORBIDDEN', async (t) => {
      const id = (await client.createSession({ model: 'offline:echo' })).session_id
      const token = await client.createToken({ scope: 'read', ttl_s: 60 })
      t.match(token, { token_type: 'Bearer', scope: 'read', session_id: null, expires_in: Number })
      const reader = new BurrowClient({ baseUrl: h.url, apiKey: token.token })
      t.equal((await reader.getCapabilities()).auth, false)
      const refused = await refusal(() => reader.startTurn(id, { input: 'no' }))
      t.equal(refused.code, 'FORBIDDEN')
      t.equal(refused.status, 403)
      const refreshed = await reader.createToken({ scope: 'read' })
      t.equal(refreshed.refresh_until, token.refresh_until, 'a refresh keeps the chain limit')
    })

    t.test('errors carry the code, the field and the request id', async (t) => {
      const missing = await refusal(() => client.startTurn(randomUUID(), { input: 'hi' }, { requestId: 'req-client-1' }))
      t.equal(missing.code, 'SESSION_NOT_FOUND')
      t.equal(missing.data?.request_id, 'req-client-1')
      const bad = await refusal(() => client.createSession({ model: 'no-colon' }))
      t.equal(bad.code, 'INVALID_REQUEST')
      t.equal(bad.data?.field, 'body/model')
      const id = (await client.createSession({ model: 'offline:echo' })).session_id
      const badTurn = await refusal(() => client.startTurn(id, { input: '' }))
      t.equal(badTurn.code, 'INVALID_REQUEST')
      t.equal(badTurn.data?.field, 'body/input')
      t.equal((await refusal(() => client.getNote(id, 'nope'))).code, 'NOTE_NOT_FOUND')
      const slowId = (await client.createSession({ model: MODEL })).session_id
      h.fake.enqueue({ api: 'openai', text: 'slow answer', chunkSize: 1, delayMs: 60 })
      const impatient = new BurrowClient({ baseUrl: h.url, timeoutMs: 150 })
      const late = await refusal(() => impatient.startTurn(slowId, { input: 'take your time' }, { onEvent: () => {} }))
      t.match(late, { code: 'INTERNAL', data: { transport: 'timeout', timeout_ms: 150 } })
      const down = new BurrowClient({ baseUrl: 'http://127.0.0.1:9' })
      const net = await refusal(() => down.getCapabilities())
      t.equal(net.code, 'INTERNAL')
      t.equal(net.data?.transport, 'network')
    })

    t.test('the idempotency key is passed through', async (t) => {
      const a = await client.createSession({ model: 'offline:echo' }, { idempotencyKey: 'create-1' })
      const b = await client.createSession({ model: 'offline:echo' }, { idempotencyKey: 'create-1' })
      t.equal(a.session_id, b.session_id)
      const id = a.session_id
      const first = await client.startTurn(id, { input: 'once' }, { idempotencyKey: 'turn-1' })
      const again = await client.startTurn(id, { input: 'once' }, { idempotencyKey: 'turn-1' })
      t.same(again, first)
      t.equal((await client.listEvents(id)).last_seq, first.last_seq, 'the model ran once')
      const conflict = await refusal(() => client.startTurn(id, { input: 'other' }, { idempotencyKey: 'turn-1' }))
      t.equal(conflict.code, 'IDEMPOTENCY_CONFLICT')
    })

    t.test('a streamed turn delivers its events and resolves to the JSON result', async (t) => {
      const id = (await client.createSession({ model: MODEL, tools: [WEATHER] })).session_id
      h.fake.enqueue({ api: 'openai', text: 'one two three four five six', chunkSize: 4, usage: { input_tokens: 12, output_tokens: 6 } })
      const seen: EventEnvelope[] = []
      const streamed = await client.startTurn(id, { input: 'count' }, { idempotencyKey: 'sse-1', onEvent: (e) => seen.push(e) })
      const deltas = seen.filter((e) => e.type === 'text_delta')
      t.ok(deltas.length >= 3, 'several deltas, as they came')
      t.equal(deltas.map((e) => (e.data as { text: string }).text).join(''), 'one two three four five six')
      const stored = seen.filter((e) => e.type !== 'text_delta')
      t.same(
        stored.map((e) => e.type),
        ['turn_started', 'assistant_message', 'turn_completed'],
      )
      t.same(
        stored.map((e) => e.seq),
        [2, 3, 4],
        'stored events in seq order',
      )
      const json = await client.startTurn(id, { input: 'count' }, { idempotencyKey: 'sse-1' })
      t.same(streamed, json, 'the same result as the JSON form')

      // A paused turn (client tools), then its continuation.
      h.fake.enqueue({ api: 'openai', text: 'Checking.', toolCalls: [{ name: 'get_weather', input: { city: 'Oslo' } }] })
      const paused = await client.startTurn(id, { input: 'Weather in Oslo?' }, { idempotencyKey: 'sse-2', onEvent: () => {} })
      t.same(paused, await client.startTurn(id, { input: 'Weather in Oslo?' }, { idempotencyKey: 'sse-2' }))
      t.equal(paused.status, 'requires_action')
      t.same(
        paused.tool_calls.map((c) => c.name),
        ['get_weather'],
      )
      h.fake.enqueue({ api: 'openai', text: 'It is 5C.' })
      const body = { tool_results: [{ tool_call_id: paused.tool_calls[0]!.id, content: '5C' }] }
      const done = await client.startTurn(id, body, { onEvent: () => {} })
      t.match(done, { turn: 2, status: 'completed', output_text: 'Checking.\n\nIt is 5C.', stop_reason: 'end_turn' })
      t.same(
        done.messages.map((m) => m.role),
        ['user', 'assistant'],
      )
    })

    for (const budget of [0, 1])
      t.test(`streamed turns with server tools and compaction (recent_turn_budget ${budget}) rebuild the same result`, async (t) => {
        h.fake.autoSummaries = true
        t.teardown(() => {
          h.fake.autoSummaries = false
        })
        const id = (
          await client.createSession({
            model: MODEL,
            compaction: { auto_compact_threshold: 1, recent_turn_budget: budget, min_turns_between_compactions: 0 },
          })
        ).session_id
        h.fake.enqueue(
          { api: 'openai', toolCalls: [{ name: 'note_set', input: { key: 'k', value: 'v' } }] },
          { api: 'openai', text: 'Noted.' },
        )
        let summarised = 0
        for (const [i, input] of ['remember k', 'and now?', 'once more'].entries()) {
          const types: string[] = []
          const streamed = await client.startTurn(
            id,
            { input },
            { idempotencyKey: `mix-${budget}-${i}`, onEvent: (e) => types.push(e.type) },
          )
          t.same(
            streamed,
            await client.startTurn(id, { input }, { idempotencyKey: `mix-${budget}-${i}` }),
            `turn ${i + 1} (${types.filter((x) => x !== 'text_delta').join(',')})`,
          )
          const head = streamed.messages[0]?.content[0]
          if (head?.type === 'text' && head.text.startsWith(SUMMARY_PREFIX)) summarised++
        }
        t.ok(
          (await client.listEvents(id, { limit: 1000 })).events.some((e) => e.type === 'compaction_completed'),
          'a compaction ran inside a turn',
        )
        if (budget === 0) t.ok(summarised > 0, 'a turn result starts with the summary')
      })

    t.test('a failed turn rejects with its code, streamed or not', async (t) => {
      const id = (await client.createSession({ model: MODEL })).session_id
      h.fake.enqueue({ status: 500 }, { status: 500 }, { status: 500 })
      const seen: string[] = []
      const streamed = await refusal(() => client.startTurn(id, { input: 'fail' }, { onEvent: (e) => seen.push(e.type) }))
      t.equal(streamed.code, 'PROVIDER_ERROR')
      t.match(streamed.data, { turn: 1, first_seq: 2 })
      t.equal(seen.at(-1), 'turn_failed')
      h.fake.enqueue({ status: 500 }, { status: 500 }, { status: 500 })
      const plain = await refusal(() => client.startTurn(id, { input: 'fail again' }))
      t.equal(plain.code, 'PROVIDER_ERROR')
      t.match(plain.data, { turn: 2 })
      t.match(await client.startTurn(id, { input: 'fine now' }), { turn: 3, status: 'completed' }, 'the session stays usable')
    })
  })

for (const mode of MODES)
  t.test(`${mode.name}: API keys`, async (t) => {
    const h = await startBurrow({ ...mode.env, BURROW_API_KEYS: 'key-a:tenantA,key-b:tenantB' })
    t.teardown(() => closeHarness(h))
    const anon = new BurrowClient({ baseUrl: h.url })
    const e = await refusal(() => anon.createSession({}))
    t.equal(e.code, 'UNAUTHORIZED')
    t.equal(e.status, 401)
    const a = new BurrowClient({ baseUrl: h.url, apiKey: 'key-a' })
    const id = (await a.createSession({})).session_id
    t.equal(
      (await refusal(() => a.startTurn(id, { input: 'x' }, { apiKey: 'key-b' }))).code,
      'SESSION_NOT_FOUND',
      'ctx.apiKey overrides the key',
    )
    t.equal((await refusal(() => a.startTurn(id, { input: 'x' }, { apiKey: 'wrong' }))).code, 'UNAUTHORIZED')
    t.equal((await anon.startTurn(id, { input: 'x' }, { apiKey: 'key-a' })).status, 'completed')
    const stream = anon.events(id, { after: 0 })
    t.equal((await refusal(() => stream.next())).code, 'UNAUTHORIZED', 'a refused stream throws, without retrying')
    const it = a.events(id, { after: 0 })
    const first = await it.next()
    await it.return()
    t.match(first.value, { kind: 'event', event: { seq: 1, type: 'session_created' } })
  })
