// The compaction controller on its own: when it fires, what it records, what it discards.
import t from 'tap'
import { createLogger } from '../../src/app/logger.js'
import { SUMMARY_PREFIX } from '../../src/core/compactor.js'
import { BurrowError } from '../../src/core/errors.js'
import type { EventEnvelope } from '../../src/core/events.js'
import { checkHistory, textOf } from '../../src/core/messages.js'
import type { EffectiveCompaction, SessionRecord } from '../../src/core/session-record.js'
import { CompactionController, estimatedHistoryTokens } from '../../src/session/compaction-controller.js'
import { DefaultCompactor } from '../../src/session/default-compactor.js'
import type { Discarded } from '../../src/session/session-reducer.js'
import { Turn } from '../../src/session/turn.js'
import { liveSession, registry, say, ScriptedClient, sessionConfig, talk } from './fixtures.js'

const CFG: EffectiveCompaction = {
  auto_compact_threshold: 1000,
  recent_turn_budget: 1,
  max_summary_tokens: 64,
  min_turns_between_compactions: 2,
  max_history_messages: null,
}

function setup(steps: ConstructorParameters<typeof ScriptedClient>[0] = [], cfg: EffectiveCompaction = CFG) {
  const client = new ScriptedClient(steps)
  const controller = new CompactionController(new DefaultCompactor(registry(client)), createLogger('silent'))
  const commits: Array<{ events: readonly EventEnvelope[]; discarded: Discarded | undefined }> = []
  const { session } = liveSession(sessionConfig({ compaction: cfg }), {
    commit: (events, _s, discarded) => {
      commits.push({ events, discarded })
    },
  })
  return { client, controller, session, commits }
}

const record = (r: SessionRecord, extra: Partial<SessionRecord>): SessionRecord => ({ ...r, ...extra })

t.test(
  'when it fires: never at the first boundary; on input tokens, the history estimate or the message count; not within the loop guard',
  async (t) => {
    const { controller, session } = setup()
    const fresh = session.record
    t.notOk(controller.shouldCompact(record(fresh, { last_input_tokens: 5000 }), CFG), 'never at a session’s first boundary')
    talk(session, 3)
    const r = session.record
    t.notOk(controller.shouldCompact(r, CFG), 'a small history')
    t.ok(controller.shouldCompact(record(r, { last_input_tokens: 1000 }), CFG), 'reported input tokens at the threshold')
    t.ok(controller.shouldCompact(record(r, { history_chars: 4000 }), CFG), 'the estimate at the threshold')
    t.equal(estimatedHistoryTokens(record(r, { history_chars: 4003 })), 1000, 'JSON chars / 4, integer division')
    t.ok(controller.shouldCompact(r, { ...CFG, max_history_messages: 5 }), 'more messages than allowed')
    t.notOk(controller.shouldCompact(r, { ...CFG, max_history_messages: 6 }))
    const guarded = record(r, { last_input_tokens: 5000, last_compaction_boundary_index: r.session_boundary_index - 1 })
    t.notOk(controller.shouldCompact(guarded, CFG), 'within min_turns_between_compactions of the last attempt')
    t.ok(controller.shouldCompact(record(guarded, { last_compaction_boundary_index: r.session_boundary_index - 2 }), CFG))
  },
)

t.test('a compaction records its start and completion, rebuilds the history, and hands what it discarded to the commit', async (t) => {
  const { controller, session, commits, client } = setup([say('SUMMARY of turns one and two', { input_tokens: 40, output_tokens: 6 })])
  talk(session, 3)
  const original = session.record.messages
  const seqs = session.record.message_seqs
  const outcome = await controller.run(new Turn(session, 3), CFG, true)
  t.same(outcome, { session_id: session.id, compacted: true, messages_before: 6, messages_after: 3, summary_tokens: 6 })
  const done = commits.at(-1)!
  t.match(commits.at(-2)!.events, [{ type: 'compaction_started', turn: 3, data: { message_count: 6 } }])
  t.match(done.events, [
    {
      type: 'compaction_completed',
      data: {
        messages_before: 6,
        messages_after: 3,
        discarded_seq_range: [seqs[0], seqs[3]],
        usage: { input_tokens: 40, output_tokens: 6 },
      },
    },
  ])
  t.same(
    done.discarded,
    { messages: original.slice(0, 4), seqs: seqs.slice(0, 4), turns: [1, 1, 2, 2] },
    'the discarded messages in original order, with their seqs and turns',
  )
  const rebuilt = session.record.messages
  t.ok(textOf(rebuilt[0]!.content).startsWith(`${SUMMARY_PREFIX}\nSUMMARY of turns one and two`))
  t.same(rebuilt.slice(1), original.slice(4), 'the last turn kept verbatim')
  t.equal(checkHistory(rebuilt), null)
  t.equal(session.record.usage.compaction_tokens, 46, 'the summary call counts as compaction tokens')
  t.same(client.requests[0]!.tools, [], 'the summary call has no tools')
})

t.test('a failed automatic compaction is recorded and leaves the history unchanged; a manual one throws', async (t) => {
  const { controller, session, commits } = setup([
    new BurrowError('PROVIDER_ERROR', 'no summary today'),
    new BurrowError('PROVIDER_ERROR', 'still none'),
  ])
  talk(session, 3)
  const before = session.record.messages
  const auto = await controller.run(new Turn(session, 3), CFG, false)
  t.match(auto, { compacted: false, reason: 'no summary today' })
  t.match(commits.at(-1)!.events, [{ type: 'compaction_failed', data: { error: 'no summary today', code: 'PROVIDER_ERROR' } }])
  t.equal(session.record.messages, before, 'the history is unchanged')
  t.equal(session.record.last_compaction_boundary_index, session.record.session_boundary_index, 'the loop guard counts from the attempt')
  t.match(await controller.run(new Turn(session, 3), CFG, true).catch((e: unknown) => e), { code: 'PROVIDER_ERROR', message: 'still none' })
})

t.test('nothing to compact is an outcome, not an error', async (t) => {
  const { controller, session } = setup()
  talk(session, 1)
  const outcome = await controller.run(new Turn(session, 1), CFG, true)
  t.match(outcome, { compacted: false, messages_before: 2, messages_after: 2, reason: /nothing to compact/ })
})

t.test('an interrupted compaction is recorded as such and ends the work with the interruption', async (t) => {
  let turn!: Turn
  const { controller, session, commits } = setup([
    async (req) => {
      turn.signal.abort(new BurrowError('INTERRUPTED', 'stop'))
      throw req.signal?.reason ?? new Error('no signal')
    },
  ])
  talk(session, 3)
  turn = new Turn(session, 3)
  t.match(await controller.run(turn, CFG, true).catch((e: unknown) => e), { code: 'INTERRUPTED', message: 'stop' })
  t.match(commits.at(-1)!.events, [{ type: 'compaction_failed', data: { code: 'INTERRUPTED' } }])
})

t.test('before an LLM call it compacts only a session configured for it and past its threshold', async (t) => {
  const { controller, session, commits } = setup([say('SUMMARY')], { ...CFG, max_history_messages: 4 })
  talk(session, 1)
  await controller.beforeLlmCall(new Turn(session, 1))
  t.equal(session.record.compactions, 0, 'under the message limit')
  talk(session, 2)
  await controller.beforeLlmCall(new Turn(session, 3))
  t.equal(session.record.compactions, 1)
  const off = liveSession(sessionConfig({ compaction: null })).session
  talk(off, 5)
  await controller.beforeLlmCall(new Turn(off, 5))
  t.equal(off.record.compactions, 0, 'a session without compaction settings')
  t.ok(commits.length > 0)
})
