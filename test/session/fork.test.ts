// Property test of forking: on random logs — turns with parallel tool calls, client tools that
// pause a turn, failed and open turns, compactions between turns and inside them — a fork at
// every seq rebuilds (by the real reducer) to a session with no open turn, a history valid for a
// provider (every tool call answered, in order), the source's history at that point with at most
// the open turn's synthetic answers added, and `forked_from` naming the source.
import t from 'tap'
import fc from 'fast-check'
import type { EventEnvelope } from '../../src/core/events.js'
import { checkHistory, type ContentBlock, type Message } from '../../src/core/messages.js'
import type { SessionRecord } from '../../src/core/session-record.js'
import { closingEvents } from '../../src/session/close-turn.js'
import { forkLog } from '../../src/session/fork.js'
import { applyEvent } from '../../src/session/session-reducer.js'
import { config } from '../contract/fixtures.js'

const AT = '2026-01-01T00:00:00.000Z'
const USAGE = { input_tokens: 3, output_tokens: 2 }

const stepArb = fc.record({ calls: fc.integer({ min: 1, max: 3 }), client: fc.boolean() })
const turnArb = fc.record({
  steps: fc.array(stepArb, { maxLength: 3 }),
  end: fc.constantFrom('completed', 'failed', 'open'),
  compactBefore: fc.boolean(),
  compactInside: fc.boolean(),
})
const logArb = fc.record({ turns: fc.array(turnArb, { minLength: 1, maxLength: 6 }), archived: fc.boolean() })

/** A session's log as the service would write it, built through the reducer so every event fits the state before it. */
function buildLog(spec: {
  turns: Array<{ steps: Array<{ calls: number; client: boolean }>; end: string; compactBefore: boolean; compactInside: boolean }>
  archived: boolean
}): EventEnvelope[] {
  const log: EventEnvelope[] = []
  let r: SessionRecord | undefined
  let ids = 0
  const emit = (turn: number, type: string, data: unknown) => {
    const e = { seq: log.length + 1, session_id: 'source', turn, type, at: AT, data } as EventEnvelope
    r = applyEvent(r, e)
    log.push(e)
  }
  /** A compaction keeping the messages from the start of the current turn on (whole turns: no tool pair is cut). */
  const compact = (turn: number) => {
    const rec = r!
    let from = rec.messages.length
    while (from > 0 && rec.message_turns[from - 1] === turn && !(from - 1 === 0 && rec.compactions > 0)) from--
    if (from <= (rec.compactions > 0 ? 1 : 0)) return // nothing before the current turn to summarise
    emit(turn, 'compaction_started', { input_tokens: 10, estimated_history_tokens: 10, message_count: rec.messages.length })
    const messagesAfter = rec.messages.length - from + 1
    emit(turn, 'compaction_completed', {
      summary_tokens: 5,
      messages_before: rec.messages.length,
      messages_after: messagesAfter,
      summary: `summary before turn ${turn}`,
      discarded_seq_range: [rec.message_seqs[0]!, rec.message_seqs[from - 1]!],
    })
  }
  emit(0, 'session_created', { config: config('t') })
  spec.turns.forEach((ts, i) => {
    const turn = i + 1
    if (ts.compactBefore && turn > 1) compact(turn - 1)
    emit(turn, 'turn_started', { input: [{ type: 'text', text: `question ${turn}` }], continuation: false })
    let paused = false
    for (const [k, step] of ts.steps.entries()) {
      if (ts.compactInside && k > 0) compact(turn)
      const calls: ContentBlock[] = Array.from({ length: step.calls }, () => ({
        type: 'tool_use',
        id: `call${ids++}`,
        name: 'lookup',
        input: {},
      }))
      const clientIds = step.client ? calls.map((c) => (c as { id: string }).id) : []
      emit(turn, 'assistant_message', {
        message: { role: 'assistant', content: [{ type: 'text', text: 'looking' }, ...calls] } as Message,
        usage: USAGE,
        stop_reason: 'tool_use',
        model: 'm',
        step: k + 1,
        ...(clientIds.length ? { client_tool_call_ids: clientIds } : {}),
      })
      for (const c of calls) emit(turn, 'tool_call', { ...(c as object), executor: step.client ? 'client' : 'server' })
      if (step.client) {
        emit(turn, 'turn_requires_action', { tool_calls: calls })
        if (ts.end === 'open' && k === ts.steps.length - 1) {
          paused = true
          break
        }
        emit(turn, 'turn_started', { input: null, continuation: true })
      }
      for (const c of calls)
        emit(turn, 'tool_result', { tool_call_id: (c as { id: string }).id, name: 'lookup', content: 'found', is_error: false })
    }
    if (paused || ts.end === 'open') {
      // Interrupted before the next turn, as the service closes a turn (synthetic answers first).
      if (i < spec.turns.length - 1) for (const p of closingEvents(r!, 'INTERRUPTED', 'interrupted')) emit(turn, p.type, p.data)
      return
    }
    if (ts.end === 'failed') emit(turn, 'turn_failed', { code: 'PROVIDER_ERROR', message: 'boom', usage: USAGE })
    else {
      emit(turn, 'assistant_message', {
        message: { role: 'assistant', content: [{ type: 'text', text: `answer ${turn}` }] },
        usage: USAGE,
        stop_reason: 'end_turn',
        model: 'm',
        step: ts.steps.length + 1,
      })
      emit(turn, 'turn_completed', { output_text: `answer ${turn}`, usage: USAGE, stop_reason: 'end_turn' })
    }
  })
  if (spec.archived && !r!.open_turn) emit(r!.turn_count, 'session_archived', {})
  return log
}

const rebuild = (events: readonly EventEnvelope[]) => {
  let r: SessionRecord | undefined
  for (const e of events) r = applyEvent(r, e)
  return r!
}

t.test('a fork at any seq has a valid history, no open turn, and the source history up to there', async (t) => {
  let forks = 0
  let closed = 0
  fc.assert(
    fc.property(logArb, (spec) => {
      const log = buildLog(spec)
      for (let at = 1; at <= log.length; at++) {
        const fork = forkLog(log, 'fork', '2026-02-02T00:00:00.000Z', { session_id: 'source', seq: at })
        forks++
        const r = rebuild(fork)
        const source = rebuild(log.slice(0, at).filter((e, i, all) => !all.slice(0, i + 1).some((x) => x.type === 'session_archived')))
        if (r.open_turn !== null) throw new Error(`fork at ${at}: a turn is still open`)
        const problem = checkHistory(r.messages)
        if (problem) throw new Error(`fork at ${at}: ${JSON.stringify(problem)}`)
        if (r.status !== 'active') throw new Error(`fork at ${at}: ${r.status}`)
        if (JSON.stringify(r.messages.slice(0, source.messages.length)) !== JSON.stringify(source.messages))
          throw new Error(`fork at ${at}: the history is not the source's`)
        if (r.messages.length > source.messages.length + 1) throw new Error(`fork at ${at}: more than the synthetic answers added`)
        if (!fork.every((e, i) => e.seq === i + 1 && e.session_id === 'fork'))
          throw new Error(`fork at ${at}: seqs are not 1..n of the fork`)
        if (r.config.forked_from?.seq !== at || r.config.forked_from.session_id !== 'source') throw new Error('no provenance')
        if (source.open_turn) closed++
      }
    }),
    { numRuns: 150 },
  )
  t.ok(forks > 1000, `${forks} forks checked`)
  t.ok(closed > 50, `${closed} of them closed an open turn`)
})

t.test('the source log is not changed, and a fork of a fork names its own source', async (t) => {
  const log = buildLog({
    turns: [
      { steps: [{ calls: 2, client: true }], end: 'completed', compactBefore: false, compactInside: false },
      { steps: [{ calls: 1, client: true }], end: 'open', compactBefore: true, compactInside: false },
    ],
    archived: false,
  })
  const copy = structuredClone(log)
  const fork = forkLog(log, 'fork', AT, { session_id: 'source', seq: log.length })
  t.same(log, copy, 'the source untouched')
  t.same(
    fork.slice(log.length).map((e) => e.type),
    ['tool_result', 'turn_failed'],
    'the paused turn closed in the fork',
  )
  t.match(fork.at(-1)!.data, { code: 'INTERRUPTED', reason: 'forked' })
  const again = forkLog(fork, 'fork2', AT, { session_id: 'fork', seq: 3 })
  t.same(rebuild(again).config.forked_from, { session_id: 'fork', seq: 3 })
})
