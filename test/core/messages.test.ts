import t from 'tap'
import { checkHistory, type Message } from '../../src/core/messages.js'
import { COMPACTION_PROMPT, SUMMARY_PREFIX } from '../../src/core/compactor.js'

const user = (text: string): Message => ({ role: 'user', content: [{ type: 'text', text }] })
const call = (...ids: string[]): Message => ({
  role: 'assistant',
  content: ids.map((id) => ({ type: 'tool_use', id, name: 't', input: {} })),
})
const results = (...ids: string[]): Message => ({
  role: 'user',
  content: ids.map((id) => ({ type: 'tool_result', tool_use_id: id, content: 'ok' })),
})

t.test('checkHistory accepts valid histories', async (t) => {
  t.equal(checkHistory([]), null)
  t.equal(checkHistory([user('a'), { role: 'assistant', content: [{ type: 'text', text: 'b' }] }]), null)
  t.equal(checkHistory([user('a'), call('1', '2'), results('2', '1'), user('c')]), null)
})

t.test('checkHistory finds orphans, duplicates and misplaced blocks', async (t) => {
  t.match(checkHistory([user('a'), call('1')]), { index: 1, problem: /tool_use 1 without its tool_result/ })
  t.match(checkHistory([user('a'), call('1', '2'), results('1')]), { index: 2, problem: /tool_use 2 without/ })
  t.match(checkHistory([user('a'), results('9')]), { index: 1, problem: /tool_result 9 without its tool_use/ })
  t.match(checkHistory([user('a'), call('1'), user('x'), results('1')]), { problem: /without/ })
  t.match(checkHistory([user('a'), call('1'), results('1', '1')]), { problem: /duplicate tool_result/ })
  t.match(checkHistory([user('a'), call('1'), results('1'), call('1'), results('1')]), { problem: /duplicate tool_use id 1/ })
})

t.test('the compaction texts are the canonical ones, verbatim', async (t) => {
  t.equal(
    COMPACTION_PROMPT,
    `You are performing a CONTEXT COMPACTION. Your job is to create a handoff summary so work can continue seamlessly.

Include:
- Current progress and key decisions made
- Important context, constraints, or user preferences discovered
- What remains to be done (clear next steps)
- Any critical data, file paths, examples, or references needed to continue
- Tool call patterns that worked or failed

Be concise and structured. Prioritize information the next context needs to act, not narrate.`,
  )
  t.equal(
    SUMMARY_PREFIX,
    '[Context compacted] A previous context produced the following summary of work so far. The current tool and session state is preserved. Use this summary to continue without duplicating work:',
  )
})
