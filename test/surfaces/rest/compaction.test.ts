import t from 'tap'
import { COMPACTION_PROMPT, SUMMARY_PREFIX } from '../../../src/core/compactor.js'
import { checkHistory } from '../../../src/core/messages.js'
import { startBurrow, type Harness } from '../../helpers/harness.js'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startFakeLlm } from '../../helpers/fake-llm-server.js'

const ON = { BURROW_COMPACTION: 'on', BURROW_SESSION_STORE: 'lmdb', BURROW_DURABILITY: 'relaxed' }
const long = (n: number, tag: string) => `${tag} ${'lorem ipsum dolor sit amet '.repeat(n)}`.trim()

/** The text of a request's user/assistant messages, per API, flattened. */
function sentTexts(api: string, body: any): string[] {
  return body.messages
    .filter((m: any) => m.role !== 'system')
    .map((m: any) => (typeof m.content === 'string' ? m.content : (m.content ?? []).map((b: any) => b.text ?? b.content ?? '').join('')))
}
const isSummaryCall = (body: any) => JSON.stringify(body.messages).includes('You are performing a CONTEXT COMPACTION')

async function events(h: Harness, id: string) {
  const view = (await h.api.get(`/v1/sessions/${id}`)).body
  const s = await h.api.sse(`/v1/sessions/${id}/events?after=0`)
  const frames = await s.until((f) => f.data.seq === view.last_seq)
  s.close()
  return frames.filter((f) => f.id).map((f) => f.data)
}

for (const [provider, model] of [
  ['openai', 'openai:gpt-4o-mini'],
  ['anthropic', 'anthropic:claude-sonnet-4-5'],
] as const) {
  t.test(`${provider}: compaction against the fake provider`, async (t) => {
    const h = await startBurrow(ON, { fake: true })
    t.teardown(() => h.close())
    const { api, fake } = h
    const mine = () => fake.requests.filter((r) => r.api === provider)

    t.test('reported input tokens over the threshold compact before the next call', async (t) => {
      const id = await api.createSession({
        model,
        compaction: { auto_compact_threshold: 5000, recent_turn_budget: 1, min_turns_between_compactions: 0 },
      })
      fake.enqueue({ api: provider, text: 'one', usage: { input_tokens: 10, output_tokens: 2 } })
      await api.turn(id, { input: 'first' })
      fake.enqueue({ api: provider, text: 'two', usage: { input_tokens: 6000, output_tokens: 2 } })
      await api.turn(id, { input: 'second' })
      const before = mine().length
      fake.enqueue(
        { api: provider, text: 'SUMMARY: user said first and second.', usage: { input_tokens: 50, output_tokens: 9 } },
        { api: provider, text: 'three' },
      )
      const r = await api.turn(id, { input: 'third' })
      t.equal(r.status, 200)
      t.equal(r.body.output_text, 'three')
      const [summaryCall, next] = mine().slice(before)
      t.ok(isSummaryCall(summaryCall!.body), 'a summary call came first')
      t.notOk(summaryCall!.body.tools, 'with no tools')
      t.equal(summaryCall!.body.max_tokens, 4096, 'with max_summary_tokens')
      const lastText = sentTexts(provider, summaryCall!.body).at(-1)!
      t.ok(lastText.endsWith(COMPACTION_PROMPT), 'the verbatim prompt is the last user message')
      const texts = sentTexts(provider, next!.body)
      const summaryText = `${SUMMARY_PREFIX}\nSUMMARY: user said first and second.`
      if (provider === 'openai') {
        t.same(
          texts,
          [`${summaryText}\nsecond`, 'two', 'third'],
          'prefix + summary, then the last complete turn and the turn in progress (consecutive user messages merged)',
        )
      } else {
        // Anthropic merges consecutive user messages: the summary and the kept turn's question share one.
        t.same(texts, [`${summaryText}second`, 'two', 'third'], 'prefix + summary, then the last complete turn and the turn in progress')
      }
      t.notOk(next!.rejected)
      const ev = await events(h, id)
      const started = ev.find((e) => e.type === 'compaction_started')!
      t.same(started.data, { input_tokens: 6000, estimated_history_tokens: started.data.estimated_history_tokens, message_count: 5 })
      const done = ev.find((e) => e.type === 'compaction_completed')!
      t.same(
        { ...done.data, usage: undefined },
        {
          summary_tokens: 9,
          messages_before: 5,
          messages_after: 4,
          summary: 'SUMMARY: user said first and second.',
          discarded_seq_range: [2, 3],
          usage: undefined,
        },
      )
      t.same(
        ev.filter((e) => e.seq >= 2 && e.seq <= 3).map((e) => e.type),
        ['turn_started', 'assistant_message'],
        'the discarded events stay in the log',
      )
      const view = (await api.get(`/v1/sessions/${id}`)).body
      t.equal(view.usage.compaction_tokens, 59, 'summary tokens count as compaction tokens')
      t.equal(view.compaction.compactions, 1)
      t.equal(view.compaction.last_compaction_boundary_index, 2)
      t.equal(view.compaction.session_boundary_index, 3)
    })

    t.test('the history estimate alone triggers it; below the threshold nothing happens', async (t) => {
      const id = await api.createSession({
        model,
        compaction: { auto_compact_threshold: 400, recent_turn_budget: 1, min_turns_between_compactions: 0 },
      })
      fake.enqueue({ api: provider, text: 'short', usage: { input_tokens: 1, output_tokens: 1 } })
      await api.turn(id, { input: 'tiny' })
      fake.enqueue({ api: provider, text: 'still short', usage: { input_tokens: 1, output_tokens: 1 } })
      await api.turn(id, { input: 'also tiny' })
      t.notOk(
        (await events(h, id)).some((e) => e.type.startsWith('compaction')),
        'below the threshold: no compaction',
      )
      fake.enqueue({ api: provider, text: long(60, 'big answer'), usage: { input_tokens: 1, output_tokens: 1 } })
      await api.turn(id, { input: long(10, 'a long question') })
      fake.enqueue(
        { api: provider, text: 'summary of it all', usage: { input_tokens: 1, output_tokens: 3 } },
        { api: provider, text: 'after' },
      )
      const r = await api.turn(id, { input: 'go on' })
      t.equal(r.body.output_text, 'after')
      const ev = await events(h, id)
      const started = ev.find((e) => e.type === 'compaction_started')!
      t.ok(started.data.estimated_history_tokens >= 400, `estimate ${started.data.estimated_history_tokens} crossed the threshold`)
      t.ok(started.data.input_tokens < 400, 'while reported tokens did not')
    })

    t.test('never at the first boundary of a session', async (t) => {
      const id = await api.createSession({
        model,
        compaction: { auto_compact_threshold: 50, recent_turn_budget: 0, min_turns_between_compactions: 0 },
      })
      fake.enqueue({ api: provider, text: 'answered without compacting first' })
      const r = await api.turn(id, { input: long(50, 'huge first message') })
      t.equal(r.status, 200)
      t.notOk((await events(h, id)).some((e) => e.type.startsWith('compaction')))
    })

    t.test('the loop guard spaces compactions out', async (t) => {
      fake.autoSummaries = true
      t.teardown(() => {
        fake.autoSummaries = false
      })
      const id = await api.createSession({
        model,
        compaction: { auto_compact_threshold: 50, recent_turn_budget: 1, min_turns_between_compactions: 3 },
      })
      for (let i = 0; i < 8; i++) {
        fake.enqueue({ api: provider, text: long(20, `answer ${i}`), usage: { input_tokens: 100, output_tokens: 1 } })
        await api.turn(id, { input: long(5, `question ${i}`) })
      }
      const ev = await events(h, id)
      const boundaries: number[] = []
      let boundary = 0
      for (const e of ev) {
        if (e.type === 'assistant_message') boundary++
        if (e.type === 'compaction_started') boundaries.push(boundary)
      }
      t.ok(boundaries.length >= 2, `compacted more than once (at boundaries ${boundaries.join(', ')})`)
      for (let i = 1; i < boundaries.length; i++) t.ok(boundaries[i]! - boundaries[i - 1]! >= 3, 'at least 3 LLM-call boundaries apart')
      t.ok(boundaries.length < 7, 'not before every call')
    })

    t.test('a failing summary call is recorded and the turn goes on with the history unchanged', async (t) => {
      const id = await api.createSession({
        model,
        compaction: { auto_compact_threshold: 100, recent_turn_budget: 0, min_turns_between_compactions: 0 },
      })
      fake.enqueue({ api: provider, text: long(20, 'answer'), usage: { input_tokens: 500, output_tokens: 1 } })
      await api.turn(id, { input: 'one' })
      const before = (await api.get(`/v1/sessions/${id}`)).body.messages
      for (const failure of [
        { status: 400, errorMessage: 'summary refused' },
        { text: 'partial', malformed: 'bad_json' as const },
      ]) {
        fake.enqueue(
          { api: provider, ...failure },
          { api: provider, text: 'the turn still answers', usage: { input_tokens: 500, output_tokens: 1 } },
        )
        const r = await api.turn(id, { input: 'next' })
        t.equal(r.status, 200)
        t.equal(r.body.output_text, 'the turn still answers')
      }
      const ev = await events(h, id)
      const failed = ev.filter((e) => e.type === 'compaction_failed')
      t.equal(failed.length, 2)
      t.equal(failed[0]!.data.code, 'PROVIDER_ERROR')
      t.match(failed[0]!.data.error, /summary refused/)
      t.match(failed[1]!.data.error, /malformed/)
      const after = (await api.get(`/v1/sessions/${id}`)).body.messages
      t.same(after.slice(0, before.length), before, 'nothing was rewritten')
      t.notOk(mine().some((r) => r.rejected))
    })

    t.test('tool-heavy sessions compact mid-loop without orphaning a tool call', async (t) => {
      fake.autoSummaries = true
      t.teardown(() => {
        fake.autoSummaries = false
      })
      const tools = [{ name: 'lookup', input_schema: { type: 'object' } }]
      const id = await api.createSession({
        model,
        tools,
        compaction: { auto_compact_threshold: 200, recent_turn_budget: 1, min_turns_between_compactions: 0 },
      })
      for (let i = 0; i < 4; i++) {
        fake.enqueue({
          api: provider,
          toolCalls: [
            { name: 'lookup', input: { i } },
            { name: 'lookup', input: { j: i } },
          ],
          usage: { input_tokens: 300, output_tokens: 1 },
        })
        const p = await api.turn(id, { input: `question ${i}` })
        t.equal(p.body.status, 'requires_action')
        // After the client's results: a server-side step (an invented tool), then the answer — compaction may run before each call.
        fake.enqueue(
          { api: provider, toolCalls: [{ name: 'invented', input: {} }], usage: { input_tokens: 300, output_tokens: 1 } },
          { api: provider, text: `answer ${i}`, usage: { input_tokens: 300, output_tokens: 1 } },
        )
        const r = await api.turn(id, {
          tool_results: p.body.tool_calls.map((c: any) => ({ tool_call_id: c.id, content: long(10, 'result') })),
        })
        t.equal(r.status, 200)
        t.equal(r.body.output_text, `answer ${i}`)
      }
      const view = (await api.get(`/v1/sessions/${id}`)).body
      t.ok(view.compaction.compactions >= 2, `${view.compaction.compactions} compactions`)
      t.equal(checkHistory(view.messages), null, 'the compacted history pairs every call with its result')
      t.same(
        mine()
          .filter((r) => r.rejected)
          .map((r) => r.rejected),
        [],
        'the provider rejected nothing',
      )
    })
  })
}

t.test('manual compaction, budget, images and capability', async (t) => {
  const h = await startBurrow({ ...ON, BURROW_PROVIDER_TIMEOUT_MS: '2000' }, { fake: true })
  t.teardown(() => h.close())
  const { api, fake } = h

  t.test('POST /compact compacts now; busy and archived sessions are refused', async (t) => {
    const id = await api.createSession({ model: 'openai:gpt-4o-mini', compaction: { recent_turn_budget: 1 } })
    for (let i = 0; i < 3; i++) {
      fake.enqueue({ text: `a${i}` })
      await api.turn(id, { input: `q${i}` })
    }
    fake.enqueue({ text: 'manual summary', usage: { input_tokens: 20, output_tokens: 4 } })
    const c = await api.post(`/v1/sessions/${id}/compact`)
    t.same(c.body, { session_id: id, compacted: true, messages_before: 6, messages_after: 3, summary_tokens: 4 })
    const view = (await api.get(`/v1/sessions/${id}`)).body
    t.equal(view.messages.length, 3)
    const nothing = await api.post(`/v1/sessions/${id}/compact`)
    t.equal(nothing.body.compacted, false, 'nothing more to discard')
    t.match(nothing.body.reason, /nothing to compact/)

    fake.enqueue({ text: 'slow', chunkSize: 1, delayMs: 40 })
    const running = api.turn(id, { input: 'slow one' })
    await new Promise((r) => setTimeout(r, 80))
    const busy = await api.post(`/v1/sessions/${id}/compact`)
    t.equal(busy.status, 409)
    t.equal(busy.body.code, 'SESSION_BUSY')
    await running
    fake.enqueue({ status: 500 }, { status: 500 }, { status: 500 })
    const failed = await api.post(`/v1/sessions/${id}/compact`)
    t.equal(failed.status, 502, 'a manual compaction reports its failure')
    t.equal(failed.body.code, 'PROVIDER_ERROR')
    await api.post(`/v1/sessions/${id}/archive`)
    const archived = await api.post(`/v1/sessions/${id}/compact`)
    t.equal(archived.status, 409)
    t.equal(archived.body.code, 'SESSION_ARCHIVED')
  })

  t.test('summary tokens count against max_total_tokens', async (t) => {
    const id = await api.createSession({
      model: 'openai:gpt-4o-mini',
      max_total_tokens: 1000,
      compaction: { auto_compact_threshold: 10, recent_turn_budget: 0, min_turns_between_compactions: 0 },
    })
    fake.enqueue({ text: 'a', usage: { input_tokens: 100, output_tokens: 1 } })
    await api.turn(id, { input: 'q' })
    fake.enqueue({ text: 'expensive summary', usage: { input_tokens: 950, output_tokens: 50 } }, { text: 'never' })
    const r = await api.turn(id, { input: 'q2' })
    t.equal(r.status, 429)
    t.equal(r.body.code, 'BUDGET_EXCEEDED')
    const view = (await api.get(`/v1/sessions/${id}`)).body
    t.equal(view.usage.compaction_tokens, 1000)
    fake.enqueue({ text: 'drain' })
    await fetch(`${fake.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer sk-test', 'content-type': 'application/json' },
      body: '{"model":"x","messages":[{"role":"user","content":"d"}]}',
    })
  })

  t.test('images and large base64 reach the summary call as placeholders', async (t) => {
    const id = await api.createSession({
      model: 'anthropic:claude-sonnet-4-5',
      compaction: { auto_compact_threshold: 2000, recent_turn_budget: 0, min_turns_between_compactions: 0 },
    })
    const png = 'iVBORw0KGgo' + 'A'.repeat(9000)
    fake.enqueue({ text: 'I see a picture', usage: { input_tokens: 3000, output_tokens: 1 } })
    await api.turn(id, {
      input: [
        { type: 'text', text: 'what is this?' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
      ],
    })
    fake.enqueue({ text: 'summary without pixels' }, { text: 'ok' })
    await api.turn(id, { input: 'and now?' })
    const summaryCall = fake.requests.find(
      (r) => r.api === 'anthropic' && isSummaryCall(r.body) && JSON.stringify(r.body).includes('what is this?'),
    )!
    const sent = JSON.stringify(summaryCall.body)
    t.notOk(sent.includes(png.slice(0, 200)), 'no base64 image data in the summary call')
    t.match(sent, /\[image: image\/png, 9011 base64 chars\]/)
  })

  t.test('a history too large for one summary call is summarised in chunks', async (t) => {
    const id = await api.createSession({
      model: 'openai:gpt-4o-mini',
      compaction: { auto_compact_threshold: 1000, recent_turn_budget: 0, min_turns_between_compactions: 0 },
    })
    for (let i = 0; i < 6; i++) {
      fake.enqueue({ text: long(40, `answer ${i}`), usage: { input_tokens: 10, output_tokens: 1 } })
      await api.turn(id, { input: long(40, `question ${i}`) })
    }
    const before = fake.requests.length
    fake.enqueue({ text: 'part one' }, { text: 'part two' }, { text: 'part three' }, { text: 'final' }, { text: 'answer after' })
    await api.turn(id, { input: 'next' })
    const summaries = fake.requests.slice(before).filter((r) => isSummaryCall(r.body))
    t.ok(summaries.length >= 2, `${summaries.length} summary calls`)
    t.match(JSON.stringify(summaries[1]!.body.messages[0]), /part one/, 'each call refines the summary so far')
    while (fake.pending() > 0) await api.turn(id, { input: 'drain' })
  })
})

t.test('a restart keeps the compacted history and the cadence', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'burrow-compact-'))
  const fake = await startFakeLlm({ openaiKey: 'sk-test', anthropicKey: 'ak-test' })
  t.teardown(async () => {
    await fake.close()
    await rm(dataDir, { recursive: true, force: true })
  })
  let h = await startBurrow(ON, { dataDir, fakeServer: fake })
  const id = await h.api.createSession({
    compaction: { auto_compact_threshold: 60, recent_turn_budget: 1, min_turns_between_compactions: 2 },
  })
  for (let i = 0; i < 4; i++) await h.api.turn(id, { input: long(3, `turn ${i}`) })
  await h.burrow.projector!.idle()
  const before = (await h.api.get(`/v1/sessions/${id}`)).body
  t.ok(before.compaction.compactions >= 1)
  const transcript = await readFile(join(dataDir, 'sessions', id, 'transcript.md'), 'utf8')
  t.match(transcript, /\*\*Compaction\*\*/, 'the transcript shows where a compaction happened')
  t.match(transcript, /left the context \(they stay in the log\)/)
  await h.close()
  h = await startBurrow(ON, { dataDir, fakeServer: fake })
  t.teardown(() => h.close())
  const after = (await h.api.get(`/v1/sessions/${id}`)).body
  t.same(after.messages, before.messages)
  t.same(after.compaction, before.compaction, 'boundary index and last compaction survive')
})

t.test('with the capability off every compaction request is refused', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb' })
  t.teardown(() => h.close())
  t.equal((await h.api.get('/v1/capabilities')).body.session_compaction, false)
  const r = await h.api.post('/v1/sessions', { compaction: {} })
  t.equal(r.status, 501)
  t.equal(r.body.detail, "Session compaction is disabled (build without 'session-compaction').")
})
