// The conformance suite of the in-process SessionService: run, without HTTP, against every
// composition of LocalSessionService (ephemeral, LMDB, later PostgreSQL). Chapters that need
// stored sessions check the refusal where sessions do not outlive the process.
import type { Test } from 'tap'
import { BurrowError } from '../../src/core/errors.js'
import type { EventEnvelope } from '../../src/core/events.js'
import { checkHistory } from '../../src/core/messages.js'
import type { CallContext, EventSubscription, SessionService, StreamFrame } from '../../src/core/session-service.js'
import { rebuild } from '../../src/session/session-reducer.js'
import type { FakeLlmServer } from '../helpers/fake-llm-server.js'

export interface ServiceUnderTest {
  service: SessionService
  /** Whether sessions outlive the process (a durable repository). */
  persistent: boolean
  /** The fake LLM server the `openai:` models of this composition talk to. */
  fake: FakeLlmServer
  /** Resolves once the asynchronous workers (memory indexing, projection) have caught up. */
  idle(): Promise<void>
  /** Closes this instance (if it is not yet) and composes the same service again over the same data (durable compositions only). */
  restart?: (() => Promise<ServiceUnderTest>) | undefined
  /** Writes a turn start straight into the stored log, as a process killed mid-turn leaves it (durable compositions only). Call after close(). */
  crashMidTurn?: ((sessionId: string) => Promise<void>) | undefined
  /** Idempotent. */
  close(): Promise<void>
}

/** Composes a service; `env` adds configuration (API keys, memory) to the composition's own. */
export type ServiceFactory = (env?: Record<string, string>) => Promise<ServiceUnderTest>

const SLOW_MODEL = 'openai:gpt-4o-mini'

export const ctx = (extra: Partial<CallContext> = {}): CallContext => ({ requestId: 'contract', ...extra })

/** The code a promise rejects with (undefined if it resolves). */
export async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p
    return undefined
  } catch (err) {
    if (!(err instanceof BurrowError)) throw err
    return err.code
  }
}

/** Frames of a subscription until `stop` matches one (then the subscription is closed). */
export async function framesUntil(sub: EventSubscription, stop: (f: StreamFrame) => boolean): Promise<StreamFrame[]> {
  const out: StreamFrame[] = []
  for await (const batch of sub) {
    for (const f of batch) {
      out.push(f)
      if (stop(f)) {
        sub.close()
        return out
      }
    }
  }
  return out
}

async function allEvents(service: SessionService, id: string): Promise<EventEnvelope[]> {
  const page = await service.listEvents(id, { after: 0, limit: 10_000 }, ctx())
  return page.events
}

const until = async (cond: () => boolean, ms = 5000) => {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time')
    await new Promise((r) => setTimeout(r, 5))
  }
}

export function sessionServiceContract(t: Test, factory: ServiceFactory): void {
  const withService = (name: string, fn: (t: Test, sut: ServiceUnderTest) => Promise<void>, env?: Record<string, string>) =>
    t.test(name, async (t) => {
      const sut = await factory(env)
      t.teardown(() => sut.close())
      await fn(t, sut)
    })

  withService('a session is created with its effective configuration; its creation is its first event', async (t, sut) => {
    const { service } = sut
    const created = await service.createSession({ model: 'offline:echo', system_prompt: 'Be brief.', metadata: { team: 'a' } }, ctx())
    t.match(created, { status: 'active', model: 'offline:echo', system_prompt: 'Be brief.', metadata: { team: 'a' }, memory: false })
    t.ok(created.compaction, 'compaction is on in this composition: its effective settings are returned')
    const page = await service.listEvents(created.session_id, { after: 0, limit: 10 }, ctx())
    t.same(
      page.events.map((e) => [e.seq, e.type]),
      [[1, 'session_created']],
    )
    t.equal(page.last_seq, 1)
    t.equal(
      await codeOf(service.startTurn('01900000-0000-7000-8000-000000000000', { input: 'x' }, ctx())),
      'SESSION_NOT_FOUND',
      'an unknown id',
    )
    t.equal(await codeOf(service.startTurn('not-an-id', { input: 'x' }, ctx())), 'SESSION_NOT_FOUND', 'a malformed id')
    t.equal(await codeOf(service.createSession({ model: 'nowhere:model' }, ctx())), 'INVALID_REQUEST')
    t.equal(service.readiness(), 'ready')
  })

  withService('a turn runs the agent loop: its events reach the caller as they happen, the result once durable', async (t, sut) => {
    const { service } = sut
    const id = (await service.createSession({ model: 'offline:echo' }, ctx())).session_id
    const seen: EventEnvelope[] = []
    const r = await service.startTurn(id, { input: 'hello there' }, ctx({ onEvent: (e) => seen.push(e) }))
    t.match(r, {
      session_id: id,
      turn: 1,
      status: 'completed',
      output_text: 'echo: hello there',
      first_seq: 2,
      stop_reason: 'end_turn',
      tool_calls: [],
    })
    t.same(
      r.messages.map((m) => m.role),
      ['user', 'assistant'],
    )
    t.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0)
    const types = seen.map((e) => e.type)
    t.equal(types[0], 'turn_started')
    t.ok(types.includes('text_delta'), 'text deltas stream to the caller')
    t.equal(types.at(-1), 'turn_completed')
    const stored = await allEvents(service, id)
    t.same(
      stored.map((e) => e.seq),
      stored.map((_, i) => i + 1),
      'gapless from 1',
    )
    t.equal(stored.at(-1)!.seq, r.last_seq)
    t.notOk(
      stored.some((e) => e.type === 'text_delta'),
      'deltas are not stored',
    )
    const second = await service.startTurn(id, { input: 'again' }, ctx())
    t.match(second, { turn: 2, output_text: 'echo: again', first_seq: r.last_seq + 1 })
  })

  withService('client tools pause a turn; their results continue it', async (t, sut) => {
    const { service } = sut
    const tools = [{ name: 'lookup', description: 'Looks things up.', input_schema: { type: 'object' as const } }]
    const id = (await service.createSession({ model: 'offline:echo', tools }, ctx())).session_id
    const paused = await service.startTurn(id, { input: '/tool lookup {"q":"moon"}' }, ctx())
    t.equal(paused.status, 'requires_action')
    t.match(paused.tool_calls, [{ name: 'lookup', input: { q: 'moon' } }])
    t.equal(await codeOf(service.startTurn(id, { input: 'not now' }, ctx())), 'SESSION_BUSY', 'the paused turn waits for its results')
    const done = await service.startTurn(id, { tool_results: [{ tool_call_id: paused.tool_calls[0]!.id, content: 'found it' }] }, ctx())
    t.match(done, { turn: 1, status: 'completed', output_text: 'tool result: found it' })
    t.equal(checkHistory(rebuild(await allEvents(service, id))!.messages), null, 'the history is valid for a provider')
  })

  withService('one turn at a time: a second concurrent turn is SESSION_BUSY', async (t, sut) => {
    const { service, fake } = sut
    const id = (await service.createSession({ model: SLOW_MODEL }, ctx())).session_id
    fake.enqueue({ api: 'openai', text: 'slowly, word by word, it answers', chunkSize: 4, delayMs: 20 })
    const before = fake.requests.length
    const first = service.startTurn(id, { input: 'take your time' }, ctx())
    await until(() => fake.requests.length > before)
    t.equal(await codeOf(service.startTurn(id, { input: 'too soon' }, ctx())), 'SESSION_BUSY')
    t.equal(await codeOf(service.compact(id, ctx())), 'SESSION_BUSY', 'nor a compaction meanwhile')
    t.equal((await first).output_text, 'slowly, word by word, it answers')
  })

  withService('interrupt cancels a running turn; the history stays valid and the next turn works', async (t, sut) => {
    const { service, fake } = sut
    const id = (await service.createSession({ model: SLOW_MODEL }, ctx())).session_id
    fake.enqueue({ api: 'openai', text: 'I will think for a long long time. '.repeat(10), chunkSize: 4, delayMs: 60 })
    const seen: EventEnvelope[] = []
    const running = service.startTurn(id, { input: 'think' }, ctx({ onEvent: (e) => seen.push(e) }))
    await until(() => seen.some((e) => e.type === 'text_delta'))
    t.same(await service.interrupt(id, ctx()), { session_id: id, interrupted: true, turn: 1 })
    const err = await running.catch((e: unknown) => e)
    t.type(err, BurrowError)
    t.match(err, { code: 'INTERRUPTED', data: { turn: 1, first_seq: 2 } })
    t.match(seen.at(-1), { type: 'turn_failed', data: { code: 'INTERRUPTED' } }, 'the caller saw the turn fail')
    t.same(await service.interrupt(id, ctx()), { session_id: id, interrupted: false, turn: null }, 'nothing left to interrupt')
    fake.enqueue({ api: 'openai', text: 'done' })
    const next = await service.startTurn(id, { input: 'now quickly' }, ctx())
    t.match(next, { turn: 2, status: 'completed', output_text: 'done' })
    const sent = fake.requests.at(-1)!
    t.notOk(sent.rejected, 'the history after the interrupt is valid for the provider')
  })

  withService('an idempotency key returns the first outcome without running again; another body under it conflicts', async (t, sut) => {
    const { service } = sut
    const create = await service.createSession({ model: 'offline:echo' }, ctx({ idempotencyKey: 'c1' }))
    t.same(
      await service.createSession({ model: 'offline:echo' }, ctx({ idempotencyKey: 'c1' })),
      create,
      'the same session, not a second one',
    )
    const id = create.session_id
    const first = await service.startTurn(id, { input: 'once' }, ctx({ idempotencyKey: 'k1' }))
    const replayed: EventEnvelope[] = []
    const again = await service.startTurn(id, { input: 'once' }, ctx({ idempotencyKey: 'k1', onEvent: (e) => replayed.push(e) }))
    t.same(again, first, 'the first result')
    t.same(
      replayed.map((e) => e.seq),
      (await allEvents(service, id)).filter((e) => e.seq >= first.first_seq).map((e) => e.seq),
      "the retry's stream replays the first run's events",
    )
    t.equal((await allEvents(service, id)).filter((e) => e.type === 'turn_started').length, 1, 'the model ran once')
    t.equal(await codeOf(service.startTurn(id, { input: 'something else' }, ctx({ idempotencyKey: 'k1' }))), 'IDEMPOTENCY_CONFLICT')
    const other = await service.startTurn(id, { input: 'once' }, ctx({ idempotencyKey: 'k2' }))
    t.equal(other.turn, 2, 'another key is another turn')
  })

  withService('compaction runs by itself when the history outgrows its threshold, and on request', async (t, sut) => {
    const { service } = sut
    const id = (
      await service.createSession(
        { model: 'offline:echo', compaction: { auto_compact_threshold: 60, recent_turn_budget: 1, min_turns_between_compactions: 0 } },
        ctx(),
      )
    ).session_id
    for (let i = 0; i < 4; i++) await service.startTurn(id, { input: `turn ${i}: ${'words to remember '.repeat(6)}` }, ctx())
    const events = await allEvents(service, id)
    const completed = events.filter((e): e is EventEnvelope<'compaction_completed'> => e.type === 'compaction_completed')
    t.ok(completed.length >= 1, 'compacted automatically')
    t.ok(events.some((e) => e.type === 'compaction_started'))
    const c = completed[0]!
    t.ok(c.data.messages_after < c.data.messages_before)
    t.ok(c.data.discarded_seq_range, 'what was compacted away is named')
    const manual = await service.compact(id, ctx())
    t.match(manual, { session_id: id })
    t.type(manual.compacted, 'boolean')
    const after = await allEvents(service, id)
    t.same(
      after.map((e) => e.seq),
      after.map((_, i) => i + 1),
      'gapless through compactions',
    )
    const next = await service.startTurn(id, { input: 'still here?' }, ctx())
    t.equal(next.output_text, 'echo: still here?', 'the session goes on after compacting')
  })

  withService('a subscription replays from any seq, then tails live; a tenant subscription sees every session', async (t, sut) => {
    const { service } = sut
    const id = (await service.createSession({ model: 'offline:echo' }, ctx())).session_id
    const first = await service.startTurn(id, { input: 'one' }, ctx())
    const tenantSub = await service.subscribe(null, {}, ctx())
    const sub = await service.subscribe(id, { after: 1 }, ctx())
    const tenantFrames = framesUntil(tenantSub, (f) => f.kind === 'event' && f.event.type === 'turn_completed')
    const frames = framesUntil(sub, (f) => f.kind === 'event' && f.event.type === 'turn_completed' && f.event.turn === 2)
    await service.startTurn(id, { input: 'two' }, ctx())
    const seqs = (await frames).flatMap((f) => (f.kind === 'event' && f.event.type !== 'text_delta' ? [f.event.seq] : []))
    t.same(
      seqs,
      Array.from({ length: seqs.length }, (_, i) => i + 2),
      'replay then live, no gap, no duplicate at the seam',
    )
    t.ok(seqs.includes(first.last_seq) && seqs.includes(first.last_seq + 1))
    t.ok((await tenantFrames).some((f) => f.kind === 'event' && f.event.session_id === id && f.event.turn === 2))
  })

  withService(
    "another tenant's session is not found, whatever the operation",
    async (t, sut) => {
      const { service } = sut
      const a = ctx({ apiKey: 'key-a' })
      const b = ctx({ apiKey: 'key-b' })
      const id = (await service.createSession({ model: 'offline:echo' }, a)).session_id
      t.equal(await codeOf(service.startTurn(id, { input: 'mine now' }, b)), 'SESSION_NOT_FOUND')
      t.equal(await codeOf(service.listEvents(id, { after: 0, limit: 10 }, b)), 'SESSION_NOT_FOUND')
      t.equal(await codeOf(service.interrupt(id, b)), 'SESSION_NOT_FOUND')
      t.equal(await codeOf(service.createSession({}, ctx({ apiKey: 'wrong' }))), 'UNAUTHORIZED')
      if (sut.persistent) t.equal(await codeOf(service.read(id, b)), 'SESSION_NOT_FOUND')
      t.equal((await service.startTurn(id, { input: 'still mine' }, a)).status, 'completed')
    },
    { BURROW_API_KEYS: 'key-a:tenant-a,key-b:tenant-b' },
  )

  withService('operations on stored sessions: read, list, archive, delete — or SESSION_PERSISTENCE_DISABLED', async (t, sut) => {
    const { service } = sut
    const id = (await service.createSession({ model: 'offline:echo', metadata: { k: 'v' } }, ctx())).session_id
    await service.startTurn(id, { input: 'keep me' }, ctx())
    if (!sut.persistent) {
      const unknown = '01900000-0000-7000-8000-0000000000ff'
      for (const op of [
        service.read(id, ctx()),
        service.read(unknown, ctx()),
        service.list({}, ctx()),
        service.archive(id, ctx()),
        service.delete(id, ctx()),
        service.resume(id, { input: 'x' }, ctx()),
      ]) {
        t.equal(await codeOf(op), 'SESSION_PERSISTENCE_DISABLED')
      }
      t.equal((await service.startTurn(id, { input: 'live sessions go on' }, ctx())).status, 'completed')
      return
    }
    const view = await service.read(id, ctx())
    t.match(view, { session_id: id, status: 'active', turn_count: 1, metadata: { k: 'v' }, running: false })
    t.same(
      view.messages.map((m) => m.role),
      ['user', 'assistant'],
    )
    t.ok((await service.list({}, ctx())).items.some((s) => s.session_id === id))
    await service.archive(id, ctx())
    t.equal((await service.read(id, ctx())).status, 'archived')
    t.equal(await codeOf(service.startTurn(id, { input: 'no more' }, ctx())), 'SESSION_ARCHIVED')
    t.same(
      (await service.list({ status: 'archived' }, ctx())).items.map((s) => s.session_id),
      [id],
    )
    await service.delete(id, ctx())
    t.equal(await codeOf(service.read(id, ctx())), 'SESSION_NOT_FOUND')
    t.notOk((await service.list({}, ctx())).items.some((s) => s.session_id === id))
  })

  withService('a restart keeps every session: its view, its log and its next turn', async (t, sut) => {
    if (!sut.restart) {
      t.pass('sessions do not outlive the process here')
      return
    }
    const id = (await sut.service.createSession({ model: 'offline:echo' }, ctx())).session_id
    const r = await sut.service.startTurn(id, { input: 'before the restart' }, ctx())
    const before = await sut.service.read(id, ctx())
    const again = await sut.restart()
    t.teardown(() => again.close())
    t.same(await again.service.read(id, ctx()), before, 'the same view')
    const next = await again.service.startTurn(id, { input: 'after it' }, ctx())
    t.match(next, { turn: 2, first_seq: r.last_seq + 1, output_text: 'echo: after it' })
    const events = await allEvents(again.service, id)
    t.same(
      events.map((e) => e.seq),
      events.map((_, i) => i + 1),
      'gapless across the restart',
    )
    const resumed = await again.service.resume(id, { input: 'resumed' }, ctx())
    t.equal(resumed.turn, 3)
  })

  withService('a turn a crash left running is closed when the service starts again', async (t, sut) => {
    if (!sut.restart || !sut.crashMidTurn) {
      t.pass('sessions do not outlive the process here')
      return
    }
    const id = (await sut.service.createSession({ model: 'offline:echo' }, ctx())).session_id
    await sut.service.startTurn(id, { input: 'fine' }, ctx())
    await sut.close()
    await sut.crashMidTurn(id)
    const again = await sut.restart()
    t.teardown(() => again.close())
    const events = await allEvents(again.service, id)
    t.match(events.at(-1), { type: 'turn_failed', turn: 2, data: { code: 'INTERRUPTED', reason: 'process_restarted' } })
    t.equal((await again.service.read(id, ctx())).running, false)
    t.equal((await again.service.startTurn(id, { input: 'and on' }, ctx())).turn, 3)
  })

  withService(
    'memory indexes what compaction discards and records memory_indexed',
    async (t, sut) => {
      const { service } = sut
      const id = (
        await service.createSession(
          {
            model: 'offline:echo',
            memory: true,
            compaction: { auto_compact_threshold: 60, recent_turn_budget: 1, min_turns_between_compactions: 0 },
          },
          ctx(),
        )
      ).session_id
      await service.startTurn(id, { input: 'The lighthouse keeper is called Ortolan Vesk.' }, ctx())
      for (let i = 0; i < 4; i++)
        await service.startTurn(id, { input: `filler ${i}: ${'more words to fill the context '.repeat(4)}` }, ctx())
      await sut.idle()
      const events = await allEvents(service, id)
      t.ok(
        events.some((e) => e.type === 'compaction_completed'),
        'compacted',
      )
      t.ok(
        events.some((e) => e.type === 'memory_indexed' && (e.data as { entries: number }).entries > 0),
        'memory_indexed recorded on the session',
      )
      const hits = await service.searchMemory({ q: 'lighthouse keeper Ortolan', scope: 'session', session_id: id }, ctx())
      t.ok(
        hits.results.some((h) => h.content.includes('Ortolan Vesk') && h.session_id === id),
        'the discarded message is found',
      )
    },
    { BURROW_MEMORY_STORE: 'hnsw', BURROW_EMBEDDER: 'hashed' },
  )

  withService('shutdown refuses new work and interrupts what still runs after the grace period', async (t, sut) => {
    const { service, fake } = sut
    const id = (await service.createSession({ model: SLOW_MODEL }, ctx())).session_id
    fake.enqueue({ api: 'openai', text: 'a very slow answer '.repeat(20), chunkSize: 2, delayMs: 50 })
    const before = fake.requests.length
    const running = service.startTurn(id, { input: 'slow' }, ctx())
    await until(() => fake.requests.length > before)
    const stopping = service.shutdown(50)
    t.equal(service.readiness(), 'shutting_down')
    t.equal(await codeOf(service.createSession({}, ctx())), 'SHUTTING_DOWN')
    await stopping
    t.match(await running.catch((e: unknown) => e), { code: 'INTERRUPTED', data: { reason: 'shutdown' } })
  })
}
