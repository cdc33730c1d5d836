// Property-based checks of the rebuild invariants over random histories: parallel tool
// calls, paused and interrupted turns, chained compactions.
import t from 'tap'
import fc from 'fast-check'
import { SUMMARY_PREFIX, COMPACTION_PROMPT } from '../../src/core/compactor.js'
import { checkHistory, isToolResultMessage, toolUsesOf, type ContentBlock, type Message } from '../../src/core/messages.js'
import {
  checkRebuild,
  chunkHistory,
  isSummaryMessage,
  isTurnStart,
  planRebuild,
  prepareForSummarization,
} from '../../src/session/history-rebuild.js'
import { applyEvent, summaryMessage } from '../../src/session/session-reducer.js'
import type { EventEnvelope } from '../../src/core/events.js'

let ids = 0
const user = (text: string): Message => ({ role: 'user', content: [{ type: 'text', text }] })
const answer = (text: string): Message => ({ role: 'assistant', content: [{ type: 'text', text }] })

/** One turn as the agent loop would record it. */
const turnArb = fc.record({
  text: fc.string({ minLength: 1, maxLength: 40 }),
  steps: fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 3 }), // tool steps, each with 1–3 parallel calls
  end: fc.constantFrom('answered', 'interrupted', 'failed_mid_tools'),
})

function buildTurn(spec: { text: string; steps: number[]; end: string }): Message[] {
  const out: Message[] = [user(spec.text)]
  for (const n of spec.steps) {
    const calls: ContentBlock[] = Array.from({ length: n }, () => ({
      type: 'tool_use',
      id: `t${ids++}`,
      name: 'tool',
      input: { q: spec.text },
    }))
    out.push({ role: 'assistant', content: [{ type: 'text', text: 'calling' }, ...calls] })
    out.push({
      role: 'user',
      content: calls.map((c) => ({
        type: 'tool_result',
        tool_use_id: (c as { id: string }).id,
        content: 'ok',
        ...(spec.end === 'failed_mid_tools' ? { is_error: true } : {}),
      })),
    })
  }
  if (spec.end === 'answered') out.push(answer(`done: ${spec.text}`))
  return out
}

const historyArb = fc.record({
  summarised: fc.boolean(), // starts with a previous compaction's summary
  turns: fc.array(turnArb, { minLength: 1, maxLength: 12 }),
  tail: fc.constantFrom('none', 'user_waiting', 'tool_results_waiting'), // the turn in progress at the check
})

function buildHistory(h: { summarised: boolean; turns: Array<{ text: string; steps: number[]; end: string }>; tail: string }): Message[] {
  const out: Message[] = h.summarised ? [summaryMessage('earlier work')] : []
  for (const s of h.turns) out.push(...buildTurn(s))
  if (h.tail === 'user_waiting') out.push(user('the question being answered'))
  if (h.tail === 'tool_results_waiting') out.push(...buildTurn({ text: 'in progress', steps: [2], end: 'interrupted' }))
  return out
}

t.test('random valid histories: the plan keeps whole turns and the rebuild keeps every invariant', async (t) => {
  fc.assert(
    fc.property(historyArb, fc.integer({ min: 0, max: 6 }), (spec, budget) => {
      const history = buildHistory(spec)
      if (checkHistory(history) !== null) return false // the generator only builds valid histories
      const plan = planRebuild(history, budget)
      if ('reason' in plan) {
        // Nothing to discard happens only when every turn is kept (a previous summary alone is not worth replacing).
        const turns = history.filter((m) => isTurnStart(m) && !isSummaryMessage(m)).length
        return turns <= budget + 1
      }
      const { keepFrom } = plan
      const kept = history.slice(keepFrom)
      const discarded = history.slice(0, keepFrom)
      const rebuilt = [summaryMessage('s'), ...kept]
      if (checkRebuild(history, keepFrom, rebuilt, discarded) !== null) return false
      if (keepFrom < history.length && !isTurnStart(history[keepFrom]!)) return false
      // A turn in progress (the history does not end with a plain answer) is always kept.
      const last = history[history.length - 1]!
      const inProgress = last.role !== 'assistant' || toolUsesOf(last).length > 0
      const lastStart = history.map(isTurnStart).lastIndexOf(true)
      if (inProgress && keepFrom > lastStart) return false
      // At most `budget` complete turns besides the one in progress.
      const keptStarts = kept.filter(isTurnStart).length
      return keptStarts <= budget + (inProgress ? 1 : 0) && keptStarts >= Math.min(1, kept.length)
    }),
    { numRuns: 500 },
  )
  t.pass('500 random histories')
})

t.test('chained compactions: compacting a compacted history keeps the invariants', async (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.array(turnArb, { minLength: 1, maxLength: 5 }), { minLength: 2, maxLength: 5 }),
      fc.integer({ min: 0, max: 3 }),
      (rounds, budget) => {
        let history: Message[] = []
        for (const turns of rounds) {
          for (const s of turns) history.push(...buildTurn(s))
          history.push(user('next question'))
          const plan = planRebuild(history, budget)
          if ('reason' in plan) continue
          const rebuilt = [summaryMessage(`round ${rounds.indexOf(turns)}`), ...history.slice(plan.keepFrom)]
          if (checkRebuild(history, plan.keepFrom, rebuilt, history.slice(0, plan.keepFrom)) !== null) return false
          history = rebuilt
          if (checkHistory(history) !== null) return false
          history.push(answer('answered'))
        }
        return true
      },
    ),
    { numRuns: 200 },
  )
  t.pass()
})

t.test('a broken rebuild is caught', async (t) => {
  const history = buildHistory({
    summarised: false,
    turns: [
      { text: 'a', steps: [2], end: 'answered' },
      { text: 'b', steps: [], end: 'answered' },
    ],
    tail: 'user_waiting',
  })
  const plan = planRebuild(history, 1) as { keepFrom: number }
  const kept = history.slice(plan.keepFrom)
  const discarded = history.slice(0, plan.keepFrom)
  t.equal(checkRebuild(history, plan.keepFrom, [summaryMessage('s'), ...kept], discarded), null)
  // Split inside the first turn: the kept part starts with an orphan tool result.
  const split = 2
  t.match(checkRebuild(history, split, [summaryMessage('s'), ...history.slice(split)], history.slice(0, split)), /turn was split|not valid/)
  t.match(checkRebuild(history, plan.keepFrom, [user('not a summary'), ...kept], discarded), /summary message/)
  t.match(checkRebuild(history, plan.keepFrom, [summaryMessage('s'), ...kept.slice(1)], discarded), /lost/)
  t.match(checkRebuild(history, plan.keepFrom, [summaryMessage('s'), ...kept], [...discarded].reverse()), /out of order/)
})

t.test('summary chunks are valid conversations and cover the history in order', async (t) => {
  fc.assert(
    fc.property(historyArb, fc.integer({ min: 200, max: 3000 }), (spec, maxChars) => {
      const history = buildHistory({ ...spec, tail: 'user_waiting' })
      const chunks = chunkHistory(history, maxChars)
      if (chunks.flat().length !== history.length || chunks.flat().some((m, i) => m !== history[i])) return false
      for (const c of chunks) {
        const call = [summaryMessage('so far'), ...c, user(COMPACTION_PROMPT)]
        if (checkHistory(call) !== null) return false
        if (isToolResultMessage(c[0]!)) return false
      }
      return true
    }),
    { numRuns: 300 },
  )
  t.pass()
})

t.test('prepareForSummarization replaces images and long base64, and never touches the history', async (t) => {
  const b64 = 'A'.repeat(5000)
  const history: Message[] = [
    {
      role: 'user',
      content: [
        { type: 'text', text: `look: ${b64} end` },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: b64 } },
      ],
    },
    { role: 'assistant', content: [{ type: 'tool_use', id: 'x', name: 'read', input: { path: '/a' } }] },
    {
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: 'x', content: [{ type: 'image', source: { type: 'url', url: 'https://e.x/y.png' } }] }],
    },
    { role: 'assistant', content: [{ type: 'text', text: 'z'.repeat(50_000) }] },
  ]
  const copy = structuredClone(history)
  const p = prepareForSummarization(history)
  t.same(history, copy, 'the session history is unchanged')
  t.same(p[0]!.content, [
    { type: 'text', text: 'look: [base64 data, 5000 chars omitted] end' },
    { type: 'text', text: '[image: image/png, 5000 base64 chars]' },
  ])
  t.same((p[2]!.content[0] as any).content, [{ type: 'text', text: '[image: https://e.x/y.png]' }])
  const long = (p[3]!.content[0] as { text: string }).text
  t.ok(long.length < 21_000 && long.includes('chars omitted'))
  t.equal(checkHistory(p), null)
})

t.test('the history estimate is kept incrementally and equals the naive recomputation', async (t) => {
  const naive = (ms: Message[]) => Math.floor(ms.reduce((n, m) => n + JSON.stringify(m).length, 0) / 4)
  fc.assert(
    fc.property(
      fc.array(
        fc.oneof(
          fc.string({ maxLength: 200 }).map((s) => ({ kind: 'turn' as const, s })),
          fc.constant({ kind: 'compact' as const, s: '' }),
        ),
        { maxLength: 40 },
      ),
      (ops) => {
        let seq = 0
        const ev = (type: string, turn: number, data: unknown) =>
          ({ seq: ++seq, session_id: 's', turn, type, at: '2026-01-01T00:00:00.000Z', data }) as EventEnvelope
        let r = applyEvent(
          undefined,
          ev('session_created', 0, {
            config: {
              tenant: 't',
              model: 'offline:echo',
              system_prompt: '',
              metadata: {},
              memory: false,
              compaction: null,
              tools: [],
              max_total_tokens: null,
            },
          }),
        )
        let turn = 0
        for (const op of ops) {
          if (op.kind === 'turn') {
            turn++
            r = applyEvent(r, ev('turn_started', turn, { input: [{ type: 'text', text: op.s || 'x' }], continuation: false }))
            r = applyEvent(
              r,
              ev('assistant_message', turn, {
                message: answer(`re: ${op.s}`),
                usage: { input_tokens: 1, output_tokens: 1 },
                stop_reason: 'end_turn',
                model: 'm',
                step: 1,
              }),
            )
            r = applyEvent(
              r,
              ev('turn_completed', turn, { output_text: '', usage: { input_tokens: 1, output_tokens: 1 }, stop_reason: 'end_turn' }),
            )
          } else if (r.messages.length > 2) {
            r = applyEvent(
              r,
              ev('compaction_completed', turn, {
                summary_tokens: 1,
                messages_before: r.messages.length,
                messages_after: 3,
                summary: 'sum',
                discarded_seq_range: null,
              }),
            )
          }
          if (Math.floor(r.history_chars / 4) !== naive(r.messages)) return false
        }
        return true
      },
    ),
    { numRuns: 300 },
  )
  t.pass()
})

t.test('the summary message is the summary prefix followed by the summary', async (t) => {
  const m = summaryMessage('the summary')
  t.same(m, { role: 'user', content: [{ type: 'text', text: `${SUMMARY_PREFIX}\nthe summary` }] })
  t.equal(toolUsesOf(m).length, 0)
})
