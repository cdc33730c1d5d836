// Surface parity (issue 6): in each capability build A–F (docs/surfaces.md) the same scenario over
// REST (JSON and SSE), JSON-RPC (HTTP, stdio, and `burrow rpc`), MCP over HTTP and the CLI
// gives the same results and the same codes, and compaction events reach every surface
// that streams — plus every session's SSE event stream, read with the `eventsource` client —
// and idempotency replay and conflict, and SESSION_BUSY, on every surface that can express them.
// Build G (issue 16) is F with sessions and memory on PostgreSQL: besides agreeing across its
// own surfaces, it must answer every step as F did on LMDB and HNSW.
import t, { type Test } from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { EventSource } from 'eventsource'
import { ERROR_TABLE } from '../../src/core/errors.js'
import { EVENT_TYPES, type EventEnvelope } from '../../src/core/events.js'
import { closeHarness } from '../client/close.js'
import { eventually, startBurrow, type Harness } from '../helpers/harness.js'
import { tempDatabase, type TempDatabase } from '../helpers/pg.js'
import { cliRpcSurface, cliSurface, type CliSurface } from './cli-surface.js'
import { COMPACTION_TYPES, norm, Transcript, type Outcome, type TurnOutcome } from './outcome.js'
import { mcpSurface, restSurface, rpcHttpSurface, rpcStdioInProcess, type Opened, type Surface } from './surfaces.js'

interface Build {
  name: string
  env: Record<string, string>
  store: boolean
  memory: boolean
  compaction: boolean
  /** Sessions and memory in PostgreSQL (a database of the build's own) instead of LMDB and HNSW. */
  postgres: boolean
  /** The embedded build this one must answer exactly as, step by step. */
  twin?: string
}
const build = (name: string, store: boolean, memory: boolean, compaction: boolean, on?: { postgres: true; twin: string }): Build => ({
  name,
  store,
  memory,
  compaction,
  postgres: on?.postgres ?? false,
  ...(on ? { twin: on.twin } : {}),
  env: {
    BURROW_SESSION_STORE: store ? (on ? 'postgres' : 'lmdb') : 'off',
    BURROW_MEMORY_STORE: memory ? (on ? 'postgres' : 'hnsw') : 'off',
    BURROW_COMPACTION: compaction ? 'on' : 'off',
  },
})
// One PostgreSQL build, the twin of F: F is the only build that runs every step (turns that
// compact into memory, memory search and management, the in-process CLI), so one build covers
// both stores at the cost of one more build rather than three.
const BUILDS = [
  build('A', false, false, false),
  build('B', true, false, false),
  build('C', false, true, false),
  build('D', false, false, true),
  build('E', true, true, false),
  build('F', true, true, true),
  build('G', true, true, true, { postgres: true, twin: 'F' }),
]
/** Each build's transcript, for its PostgreSQL twin to compare with. */
const TRANSCRIPTS = new Map<string, Transcript>()

// With offline:echo these compact from turn 4 on without memory (from turn 3 with its longer
// system prompt; turn 2 then starts a compaction that finds nothing to discard).
const COMPACTION = { auto_compact_threshold: 150, recent_turn_budget: 1, min_turns_between_compactions: 1 }
const BASE = { model: 'offline:echo', system_prompt: 'Parity.', metadata: { suite: 'parity' } }
const INPUTS = [
  'Alpha: the harbour lights are violet tonight.',
  'Bravo: the ferry leaves at seven.',
  'Charlie: pack the red lantern.',
  'Delta: the tide turns at noon.',
  'Echo: remember the violet lights.',
]
const RESUME = 'Foxtrot: carry on.'
const SEED = 'Parity beacon: the lighthouse keeper is called Ingrid.'
const UNKNOWN = '01900000-0000-7000-8000-000000000000'
const CALL = '/tool lookup {"q":1}' // offline:echo calls the client tool `lookup` and the turn pauses
const pausedId = (opened: Array<[string, Opened]>, s: Surface) => opened.find(([name]) => name === s.name)?.[1].id ?? UNKNOWN
const PERSISTENCE_OFF = 'SESSION_PERSISTENCE_DISABLED'

async function each<T>(surfaces: Surface[], fn: (s: Surface) => Promise<T>): Promise<Array<[string, T]>> {
  const out: Array<[string, T]> = []
  for (const s of surfaces) out.push([s.name, await fn(s)])
  return out
}

/** What opening answered: the create's failure, else the first turn's outcome. */
const opening = (o: Opened): Outcome => (o.created && !o.created.ok ? o.created : o.first!.outcome)

/** Every surface that streams showed the same compaction events during the turn. */
function sameStreams(t: Test, label: string, results: Array<[string, TurnOutcome]>): void {
  const streamed = results.filter(([, r]) => r.streamed !== null)
  for (const [name, r] of streamed.slice(1))
    t.same(r.streamed, streamed[0]![1].streamed, `${label}: ${name} streams the compaction events ${streamed[0]![0]} does`)
}

/** A session's SSE stream (`GET /v1/sessions/{id}/events?after=0`) through the `eventsource` client. */
function observe(url: string, id: string): { events: EventEnvelope[]; close(): void } {
  const es = new EventSource(`${url}/v1/sessions/${id}/events?after=0`)
  const events: EventEnvelope[] = []
  for (const type of EVENT_TYPES.filter((x) => x !== 'text_delta')) {
    es.addEventListener(type, (m) => {
      const e = JSON.parse(m.data) as EventEnvelope
      if (!events.some((x) => x.seq === e.seq)) events.push(e) // a reconnect replays from Last-Event-ID
    })
  }
  return { events, close: () => es.close() }
}
const compactionLog = (events: EventEnvelope[]) =>
  events.filter((e) => (COMPACTION_TYPES as readonly string[]).includes(e.type)).map((e) => `${e.turn}:${e.type}`)

async function openSurfaces(h: Harness): Promise<{ surfaces: Surface[]; cli: CliSurface }> {
  const cli = cliSurface({ url: h.url })
  const surfaces = [
    restSurface(h, 'json'),
    restSurface(h, 'sse'),
    rpcHttpSurface(h),
    rpcStdioInProcess(h),
    cliRpcSurface(h.url),
    await mcpSurface(h),
    cli,
  ]
  return { surfaces, cli }
}

for (const b of BUILDS) {
  const on = b.postgres ? ' on PostgreSQL' : ''
  t.test(`build ${b.name} (store ${b.store}, memory ${b.memory}, compaction ${b.compaction}${on}): every surface agrees`, async (t) => {
    // Dropped at teardown after the server has closed (tap runs teardowns last registered first).
    const db: TempDatabase | null = b.postgres ? await tempDatabase(t, 'parity') : null
    const env = db ? { ...b.env, BURROW_DATABASE_URL: db.url, BURROW_PG_POOL_SIZE: '4' } : b.env
    const h = await startBurrow(env)
    const { surfaces, cli } = await openSurfaces(h)
    const observers = new Map<string, ReturnType<typeof observe>>()
    t.teardown(async () => {
      for (const o of observers.values()) o.close()
      await Promise.all(surfaces.map((s) => s.close()))
      await closeHarness(h)
    })
    const transcript = new Transcript()
    TRANSCRIPTS.set(b.name, transcript)
    const { agree } = transcript
    const ids = new Map<string, string>()
    const turns = new Map<string, TurnOutcome[]>(surfaces.map((s) => [s.name, []]))
    const seqs = !b.memory
    // Without the store the CLI cannot continue a session: `resume` is its only turn command.
    const continuing = () => surfaces.filter((s) => b.store || s !== cli)

    await t.test('capabilities', async (t) => {
      const caps = agree(t, 'capabilities', await each(surfaces, (s) => s.capabilities()))
      t.match(caps, { session_store: b.store, memory_store: b.memory, session_compaction: b.compaction })
    })

    await t.test('create: refused configurations and invalid requests', async (t) => {
      const refusals: Array<[string, Record<string, unknown>, string]> = []
      if (!b.compaction) refusals.push(['compaction config', { compaction: COMPACTION }, 'SESSION_COMPACTION_DISABLED'])
      if (!b.memory) refusals.push(['memory: true', { memory: true }, 'MEMORY_STORE_DISABLED'])
      if (!b.compaction && !b.memory)
        refusals.push(['compaction and memory', { compaction: COMPACTION, memory: true }, 'SESSION_COMPACTION_DISABLED'])
      for (const [label, req, code] of refusals) {
        const results = await each(surfaces, async (s) => opening(await s.open({ ...BASE, ...req }, INPUTS[0]!)))
        agree(t, `create with ${label}`, results, { code })
        for (const [, o] of results) if (!o.ok) t.equal(o.message, ERROR_TABLE[code as keyof typeof ERROR_TABLE].message)
      }
      agree(
        t,
        'create with an unknown property',
        await each(surfaces, async (s) => opening(await s.open({ ...BASE, bogus: 1 }, INPUTS[0]!))),
        { code: 'INVALID_REQUEST' },
      )
    })

    await t.test('create and the first turn', async (t) => {
      const req = { ...BASE, ...(b.compaction ? { compaction: COMPACTION } : {}), ...(b.memory ? { memory: true } : {}) }
      const opened = await each(surfaces, (s) => s.open(req, INPUTS[0]!))
      const created = agree(
        t,
        'create',
        opened.filter(([, o]) => o.created !== null).map(([n, o]) => [n, o.created!]),
        { normalise: norm.created },
      )
      t.match(created, { memory: b.memory, compaction: b.compaction ? COMPACTION : null, status: 'active' })
      const first = agree(
        t,
        'turn 1',
        opened.map(([n, o]) => [n, o.first?.outcome ?? o.created!]),
        { normalise: norm.turn(seqs) },
      )
      t.match(first, { turn: 1, status: 'completed', output_text: `echo: ${INPUTS[0]}` })
      for (const [name, o] of opened) {
        if (!o.id || !o.first) continue
        ids.set(name, o.id)
        turns.get(name)!.push(o.first)
        observers.set(name, observe(h.url, o.id))
      }
      t.equal(new Set(ids.values()).size, surfaces.length, 'each surface has its own session')
    })

    await t.test('turns 2–5: same results; compaction events on every streaming surface', async (t) => {
      if (!b.store) {
        const r = await cli.turn(ids.get(cli.name)!, INPUTS[1]!)
        agree(t, 'cli resume without the store', [[cli.name, r.outcome]], { code: PERSISTENCE_OFF })
      }
      for (let n = 2; n <= INPUTS.length; n++) {
        const results = await each(continuing(), (s) => s.turn(ids.get(s.name)!, INPUTS[n - 1]!))
        for (const [name, r] of results) turns.get(name)!.push(r)
        const ref = agree(
          t,
          `turn ${n}`,
          results.map(([name, r]) => [name, r.outcome]),
          { normalise: norm.turn(seqs) },
        )
        t.match(ref, { turn: n, status: 'completed', output_text: `echo: ${INPUTS[n - 1]}` })
        sameStreams(t, `turn ${n}`, results)
      }
      const all = (name: string) => turns.get(name)!.flatMap((r, i) => (r.streamed ?? []).map((x) => `${i + 1}:${x}`))
      for (const s of continuing().filter((x) => x.streaming)) {
        const types = all(s.name).map((x) => x.split(':')[1])
        if (b.compaction) {
          t.ok(
            types.includes('compaction_started') && types.includes('compaction_completed'),
            `${s.name} streamed compaction_started and compaction_completed: ${all(s.name).join(' ')}`,
          )
        } else {
          t.same(types, [], `${s.name} streamed no compaction event`)
        }
      }

      // Every session's own SSE stream, whichever surface drove it.
      await eventually(
        () => [...observers].every(([name, o]) => o.events.some((e) => e.type === 'turn_completed' && e.turn === turns.get(name)!.length)),
        5000,
      )
      const full = [...observers].filter(([name]) => turns.get(name)!.length === INPUTS.length)
      const [refName, refObs] = full[0]!
      for (const [name, o] of full) {
        t.same(
          compactionLog(o.events),
          compactionLog(refObs.events),
          `the event stream of ${name}'s session shows the compactions of ${refName}'s`,
        )
        if (turns.get(name)!.some((r) => r.streamed !== null)) {
          t.same(all(name), compactionLog(o.events), `${name} streamed what its session's event log records`)
        }
      }
      // Envelopes are the same on every surface (docs/api.md, Events): what a turn delivered is what the session stream carries.
      for (const [name, o] of observers) {
        for (const [i, r] of turns.get(name)!.entries()) {
          if (!r.envelopes || !r.outcome.ok) continue
          const stored = r.envelopes.filter((e) => e.type !== 'text_delta')
          t.same(
            stored,
            stored.map((e) => o.events.find((x) => x.seq === e.seq)),
            `turn ${i + 1}: ${name} delivered the envelopes of its session's stream`,
          )
          t.same(
            stored.map((e) => e.seq),
            stored.map((_, k) => stored[0]!.seq + k),
            `turn ${i + 1}: ${name}'s events are gapless`,
          )
          const text = r.envelopes.flatMap((e) => (e.type === 'text_delta' ? [(e.data as { text: string }).text] : [])).join('')
          t.equal(text, r.outcome.value.output_text, `turn ${i + 1}: ${name}'s text deltas make the output text`)
        }
      }
      if (b.compaction)
        t.ok(
          compactionLog(refObs.events).some((x) => x.endsWith('compaction_completed')),
          `the session streams show compactions: ${compactionLog(refObs.events).join(' ')}`,
        )
      else t.same(compactionLog(refObs.events), [], 'no compaction without the capability')
      transcript.note(t, `the event stream of ${refName}'s session`, compactionLog(refObs.events))
      if (b.memory && b.compaction) {
        // Memory indexing is asynchronous: results below are compared once it has settled.
        await eventually(
          () =>
            [...observers.values()].every((o) => {
              const count = (type: string) => o.events.filter((e) => e.type === type).length
              return count('memory_indexed') >= count('compaction_completed')
            }),
          5000,
        )
      }
    })

    await t.test('read and list', async (t) => {
      const code = b.store ? undefined : PERSISTENCE_OFF
      const view = agree(t, 'read', await each(surfaces, (s) => s.read(ids.get(s.name)!)), { code, normalise: norm.view(seqs) })
      if (b.store) {
        // The CLI's session ran as many turns as the others (with the store it resumes).
        t.match(view, { status: 'active', turn_count: INPUTS.length, memory: b.memory })
        t.equal(view.compaction?.compactions > 0, b.compaction, 'compactions recorded in the view')
      }
      agree(t, 'read an unknown session', await each(surfaces, (s) => s.read(UNKNOWN)), {
        code: b.store ? 'SESSION_NOT_FOUND' : PERSISTENCE_OFF,
      })
      const page = agree(t, 'list', await each(surfaces, (s) => s.list({ limit: 100 })), { code })
      if (b.store)
        t.same(page.items.map((i: any) => i.session_id).sort(), [...ids.values()].sort(), 'the list holds every surface’s session')
      if (!b.store) {
        const r = await cli.exec(['sessions', 'list'])
        t.same(
          r,
          { exit: 3, stdout: "Session persistence is disabled (build without 'session-store').\n", stderr: '' },
          'burrow sessions list without the store',
        )
      }
    })

    await t.test('unknown sessions and invalid input', async (t) => {
      const live = surfaces.filter((s) => s !== cli)
      agree(t, 'turn on an unknown session', await each(live, async (s) => (await s.turn(UNKNOWN, 'hi')).outcome), {
        code: 'SESSION_NOT_FOUND',
      })
      // The CLI's turn command on an existing session is `resume`, which needs the store.
      agree(t, 'cli: resume an unknown session', [[cli.name, (await cli.turn(UNKNOWN, 'hi')).outcome]], {
        code: b.store ? 'SESSION_NOT_FOUND' : PERSISTENCE_OFF,
      })
      agree(t, 'turn with an empty input', await each(surfaces, async (s) => (await s.turn(ids.get(s.name)!, '')).outcome), {
        code: 'INVALID_REQUEST',
      })
      agree(t, 'memory search with limit 0', await each(surfaces, (s) => s.search({ q: 'x', limit: 0 })), { code: 'INVALID_REQUEST' })
    })

    await t.test('idempotency: a retry answers as the first; another request under its key conflicts', async (t) => {
      const keyed = surfaces.filter((s) => s.keyed)
      const key = (s: Surface, what: string) => `parity-${b.name}-${s.name}-${what}`
      const created = await each(keyed, (s) => s.keyed!.create(BASE, key(s, 'create')))
      agree(t, 'create under a key', created, { normalise: norm.created })
      const again = await each(keyed, (s) => s.keyed!.create(BASE, key(s, 'create')))
      agree(t, 'the create retried', again, { normalise: norm.created })
      for (const [i, [name, o]] of again.entries()) t.same(o, created[i]![1], `${name}: the retried create answers the first's session`)
      agree(
        t,
        'another create under the key',
        await each(keyed, (s) => s.keyed!.create({ ...BASE, system_prompt: 'Other.' }, key(s, 'create'))),
        { code: 'IDEMPOTENCY_CONFLICT' },
      )
      const id = (s: Surface) => {
        const o = created.find(([name]) => name === s.name)![1]
        return o.ok ? (o.value.session_id as string) : UNKNOWN
      }
      const first = await each(keyed, (s) => s.keyed!.turn(id(s), INPUTS[0]!, key(s, 'turn')))
      t.match(agree(t, 'turn under a key', first, { normalise: norm.turn(seqs) }), { turn: 1, output_text: `echo: ${INPUTS[0]}` })
      const retried = await each(keyed, (s) => s.keyed!.turn(id(s), INPUTS[0]!, key(s, 'turn')))
      agree(t, 'the turn retried', retried, { normalise: norm.turn(seqs) })
      for (const [i, [name, o]] of retried.entries()) t.same(o, first[i]![1], `${name}: the retried turn answers the first`)
      agree(t, 'another turn under the key', await each(keyed, (s) => s.keyed!.turn(id(s), INPUTS[1]!, key(s, 'turn'))), {
        code: 'IDEMPOTENCY_CONFLICT',
      })
      // The retry ran nothing: the next turn is the session's second.
      const next = await each(keyed, async (s) => (await s.turn(id(s), INPUTS[1]!)).outcome)
      t.match(agree(t, 'the next turn', next, { normalise: norm.turn(seqs) }), { turn: 2, output_text: `echo: ${INPUTS[1]}` })
    })

    await t.test('session busy: a turn while one waits for tool results', async (t) => {
      const live = surfaces.filter((s) => s !== cli) // the CLI's `run` declares no tools
      const paused = await each(live, (s) => s.open({ ...BASE, tools: [{ name: 'lookup', input_schema: { type: 'object' } }] }, CALL))
      t.match(
        agree(
          t,
          'a turn that calls a client tool',
          paused.map(([n, o]) => [n, opening(o)]),
          { normalise: norm.paused },
        ),
        {
          turn: 1,
          status: 'requires_action',
          tool_calls: [{ name: 'lookup', input: { q: 1 } }],
        },
      )
      agree(t, 'another turn meanwhile', await each(live, async (s) => (await s.turn(pausedId(paused, s), 'hi')).outcome), {
        code: 'SESSION_BUSY',
      })
    })

    await t.test('model settings and the busy policy on every surface', async (t) => {
      const live = continuing()
      const opened = new Map((await each(live, (s) => s.open(BASE, INPUTS[0]!))).map(([n, o]) => [n, o.id!]))
      const turn = (extra: Record<string, unknown>, input = 'alpha STOP beta') =>
        each(live, async (s) => (await s.turn(opened.get(s.name)!, input, 'start', extra)).outcome)
      const cut = agree(t, 'a turn with a stop sequence, queued on an idle session', await turn({ stop: ['STOP'], on_busy: 'queue' }), {
        normalise: norm.turn(seqs),
      })
      t.match(cut, { turn: 2, output_text: 'echo: alpha ' })
      agree(t, 'a temperature out of range', await turn({ temperature: 9 }), { code: 'INVALID_REQUEST' })
      agree(t, 'an unknown busy policy', await turn({ on_busy: 'later' }), { code: 'INVALID_REQUEST' })
    })

    await t.test('memory search', async (t) => {
      if (!b.memory) {
        agree(t, 'memory search', await each(surfaces, (s) => s.search({ q: 'lighthouse keeper' })), { code: 'MEMORY_STORE_DISABLED' })
        return
      }
      t.equal((await h.api.post('/v1/memory', [{ content: SEED }])).status, 201)
      const hits = agree(t, 'memory search (tenant)', await each(surfaces, (s) => s.search({ q: 'lighthouse keeper Ingrid', limit: 3 })))
      t.equal(hits.results[0]?.content, SEED, 'the added entry is the best hit')
      const own = agree(
        t,
        'memory search (own session)',
        await each(surfaces, (s) => s.search({ q: 'harbour lights violet', scope: 'session', session_id: ids.get(s.name)!, limit: 5 })),
        { normalise: norm.hits },
      )
      if (b.compaction)
        t.ok(
          own.results.some((r: any) => r.content === INPUTS[0]),
          'compacted turns are searchable in every session',
        )
      else t.same(own.results, [], 'nothing is indexed without compaction')
      agree(t, 'memory search in an unknown session', await each(surfaces, (s) => s.search({ q: 'x', session_id: UNKNOWN })), {
        code: 'SESSION_NOT_FOUND',
      })
    })

    await t.test('memory management', async (t) => {
      if (!b.memory) {
        for (const [op, q] of [
          ['list', {}],
          ['get', { id: UNKNOWN }],
          ['delete', { id: UNKNOWN }],
        ] as const) {
          agree(t, `memory ${op}`, await each(surfaces, (s) => s.memory(op, q)), { code: 'MEMORY_STORE_DISABLED' })
        }
        return
      }
      const meta = { suite: 'parity-manage' }
      const added = await h.api.post('/v1/memory', [
        { content: 'Kept: the signal flag is blue.', metadata: meta },
        ...surfaces.map((s) => ({ content: `Dropped by ${s.name}: the signal flag is green.`, metadata: { ...meta, by: s.name } })),
      ])
      const [kept, ...own] = added.body.ids as string[]
      const all = agree(t, 'memory list (metadata filter)', await each(surfaces, (s) => s.memory('list', { metadata: meta, limit: 100 })))
      t.same(
        all.items.map((e: any) => e.id),
        added.body.ids,
      )
      const page = agree(t, 'memory list (a page)', await each(surfaces, (s) => s.memory('list', { metadata: meta, limit: 2 })))
      t.ok(page.next_cursor)
      agree(
        t,
        'memory list (next page)',
        await each(surfaces, (s) => s.memory('list', { metadata: meta, limit: 2, cursor: page.next_cursor })),
      )
      t.match(agree(t, 'memory get', await each(surfaces, (s) => s.memory('get', { id: kept }))), { id: kept, metadata: meta })
      agree(t, 'memory get (unknown)', await each(surfaces, (s) => s.memory('get', { id: UNKNOWN })), { code: 'MEMORY_NOT_FOUND' })
      agree(t, 'memory delete (unknown)', await each(surfaces, (s) => s.memory('delete', { id: UNKNOWN })), { code: 'MEMORY_NOT_FOUND' })
      for (const [i, s] of surfaces.entries())
        t.same(await s.memory('delete', { id: own[i] }), { ok: true, value: { id: own[i], deleted: true } }, `${s.name}: delete`)
      t.same(
        agree(t, 'memory list after deletes', await each(surfaces, (s) => s.memory('list', { metadata: meta }))).items.map(
          (e: any) => e.id,
        ),
        [kept],
      )
      const hits = agree(t, 'memory search (metadata filter)', await each(surfaces, (s) => s.search({ q: 'signal flag', metadata: meta })))
      t.same(
        hits.results.map((r: any) => r.id),
        [kept],
      )
    })

    if (b.store && b.compaction) {
      await t.test('the CLI in-process on a data dir answers as over --url', async (t) => {
        const dataDir = await mkdtemp(join(tmpdir(), 'burrow-parity-cli-'))
        t.teardown(() => rm(dataDir, { recursive: true, force: true }))
        const local = cliSurface({ dataDir, env: { ...env, LOG_LEVEL: 'silent' } }, 'cli-local')
        const opened = await local.open({ ...BASE, compaction: COMPACTION, memory: true }, INPUTS[0]!)
        const id = opened.id!
        const mine: TurnOutcome[] = [opened.first!]
        for (const input of INPUTS.slice(1)) mine.push(await local.turn(id, input))
        const remote = turns.get(cli.name)!
        mine.forEach((r, i) => {
          agree(
            t,
            `turn ${i + 1}`,
            [
              [cli.name, remote[i]!.outcome],
              [local.name, r.outcome],
            ],
            { normalise: norm.turn(seqs) },
          )
          t.same(r.streamed, remote[i]!.streamed, `turn ${i + 1}: the same compaction notices`)
        })
        agree(
          t,
          'read',
          [
            [cli.name, await cli.read(ids.get(cli.name)!)],
            [local.name, await local.read(id)],
          ],
          { normalise: norm.view(seqs) },
        )
      })
    }

    await t.test('resume with a new input', async (t) => {
      const results = await each(surfaces, (s) => s.turn(ids.get(s.name)!, RESUME, 'resume'))
      const outcomes = results.map(([name, r]): [string, Outcome] => [name, r.outcome])
      if (!b.store) {
        agree(t, 'resume', outcomes, { code: PERSISTENCE_OFF })
        return
      }
      t.match(agree(t, 'resume', outcomes, { normalise: norm.turn(seqs) }), { turn: INPUTS.length + 1, output_text: `echo: ${RESUME}` })
      sameStreams(t, 'resume', results)
    })

    await t.test('update settings and metadata, then list by metadata', async (t) => {
      const results = await each(surfaces, (s) =>
        s.update(ids.get(s.name)!, { metadata: { surface: s.name }, system_prompt: 'Answer briefly.' }),
      )
      if (!b.store) {
        agree(t, 'update', results, { code: PERSISTENCE_OFF })
        return
      }
      const view = agree(t, 'update', results, { normalise: (v: any) => ({ ...norm.view(seqs)(v), metadata: undefined }) })
      t.equal(view.system_prompt, 'Answer briefly.', 'the new system prompt')
      for (const [name, o] of results) if (o.ok) t.equal(o.value.metadata.surface, name, `${name}: the metadata merged`)
      for (const [name, o] of await each(surfaces, (s) => s.list({ limit: 10, metadata: { surface: s.name } })))
        t.same(
          o.ok ? o.value.items.map((i: any) => i.session_id) : o,
          [ids.get(name)],
          `${name}: listing by metadata finds its session only`,
        )
      await eventually(() => [...observers.values()].every((o) => o.events.some((e) => e.type === 'session_updated')), 5000)
    })

    await t.test('fork the session, then a turn on the fork', async (t) => {
      const results = await each(surfaces, (s) => s.fork(ids.get(s.name)!, {}))
      if (!b.store) {
        agree(t, 'fork', results, { code: PERSISTENCE_OFF })
        return
      }
      const view = agree(t, 'fork', results, {
        normalise: (v: any) => ({ ...norm.view(seqs)(v), metadata: undefined, forked_from: undefined }),
      })
      t.equal(view.system_prompt, 'Answer briefly.', 'the fork has the source settings')
      for (const [name, o] of results)
        if (o.ok) t.equal(o.value.forked_from.session_id, ids.get(name), `${name}: forked_from names the source`)
      const turns = await each(surfaces, async (s) => {
        const fork = results.find(([name]) => name === s.name)![1]
        return (await s.turn(fork.ok ? fork.value.session_id : 'none', 'on the fork')).outcome
      })
      t.match(agree(t, 'turn on the fork', turns, { normalise: norm.turn(seqs) }), { output_text: 'echo: on the fork' })
    })

    await t.test('archive, then a turn on the archived session', async (t) => {
      const results = await each(surfaces, (s) => s.archive(ids.get(s.name)!))
      if (!b.store) {
        agree(t, 'archive', results, { code: PERSISTENCE_OFF })
        return
      }
      t.same(agree(t, 'archive', results, { normalise: norm.archived }), { status: 'archived' })
      for (const [name, o] of results) if (o.ok) t.equal(o.value.session_id, ids.get(name), `${name} names the archived session`)
      agree(t, 'turn on an archived session', await each(surfaces, async (s) => (await s.turn(ids.get(s.name)!, 'more')).outcome), {
        code: 'SESSION_ARCHIVED',
      })
      await eventually(() => [...observers.values()].every((o) => o.events.some((e) => e.type === 'session_archived')), 5000)
    })

    if (b.twin) {
      await t.test(`every step answers as build ${b.twin}`, async (t) => {
        const twin = TRANSCRIPTS.get(b.twin!)
        if (!twin) return t.fail(`build ${b.twin} did not run before ${b.name}: nothing to compare with`)
        const steps = transcript.steps.map(([step]) => step)
        t.same(
          steps,
          twin.steps.map(([step]) => step),
          'the same steps, in the same order',
        )
        t.equal(new Set(steps).size, steps.length, 'each step is named once')
        const theirs = new Map(twin.steps)
        for (const [step, answer] of transcript.steps) t.same(answer, theirs.get(step), step)
      })
    }
  })
}
