// Token and cost counters in /metrics, by model: turns and compactions count, with tracing off.
import t from 'tap'
import { MAX_MODEL_LABELS } from '../../src/app/metrics.js'
import { startBurrow } from '../helpers/harness.js'

/** Parses Prometheus text exposition into name{labels} → value. */
function metrics(text: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue
    const i = line.lastIndexOf(' ')
    out.set(line.slice(0, i), Number(line.slice(i + 1)))
  }
  return out
}

t.test('burrow_llm_tokens_total and burrow_llm_cost_usd_total by model', async (t) => {
  const h = await startBurrow(
    { BURROW_COMPACTION: 'on', BURROW_MODEL_PRICES: 'openai:gpt-4o-mini=0.15/0.6,anthropic:claude-sonnet-4-5=3/15' },
    { fake: true },
  )
  t.teardown(() => h.close())
  const { api, fake } = h
  const openai = await api.createSession({ model: 'openai:gpt-4o-mini', compaction: { recent_turn_budget: 1 } })
  for (let i = 0; i < 3; i++) {
    fake.enqueue({ api: 'openai', text: `a${i}`, usage: { input_tokens: 1000, output_tokens: 100 } })
    t.equal((await api.turn(openai, { input: `q${i}` })).status, 200)
  }
  // The manual compaction's summary call counts too.
  fake.enqueue({ api: 'openai', text: 'summary', usage: { input_tokens: 500, output_tokens: 50 } })
  t.equal((await api.post(`/v1/sessions/${openai}/compact`)).body.compacted, true)
  const anthropic = await api.createSession({ model: 'anthropic:claude-sonnet-4-5' })
  fake.enqueue({ api: 'anthropic', text: 'hi', usage: { input_tokens: 2000, output_tokens: 1000 } })
  t.equal((await api.turn(anthropic, { input: 'hello' })).status, 200)
  // The offline model has no price: its tokens count, its cost does not.
  const offline = await api.createSession({ model: 'offline:echo' })
  const echoed = await api.turn(offline, { input: 'echo this' })
  // A failed call counts nothing.
  fake.enqueue({ api: 'openai', status: 400, errorMessage: 'no' })
  t.equal((await api.turn(openai, { input: 'refused' })).status, 502)

  const m = metrics((await api.get('/metrics')).body)
  t.equal(m.get('burrow_llm_tokens_total{provider="openai",model="gpt-4o-mini",type="input"}'), 3500)
  t.equal(m.get('burrow_llm_tokens_total{provider="openai",model="gpt-4o-mini",type="output"}'), 350)
  t.equal(m.get('burrow_llm_tokens_total{provider="anthropic",model="claude-sonnet-4-5",type="input"}'), 2000)
  t.equal(m.get('burrow_llm_tokens_total{provider="anthropic",model="claude-sonnet-4-5",type="output"}'), 1000)
  t.equal(m.get('burrow_llm_tokens_total{provider="offline",model="echo",type="input"}'), echoed.body.usage.input_tokens)
  t.ok(echoed.body.usage.input_tokens > 0)
  const cost = (labels: string) => m.get(`burrow_llm_cost_usd_total{${labels}}`)
  t.ok(Math.abs(cost('provider="openai",model="gpt-4o-mini"')! - (3500 * 0.15 + 350 * 0.6) / 1e6) < 1e-12)
  t.ok(Math.abs(cost('provider="anthropic",model="claude-sonnet-4-5"')! - (2000 * 3 + 1000 * 15) / 1e6) < 1e-12)
  t.equal(cost('provider="offline",model="echo"'), undefined, 'no price, no cost series')
})

t.test('model names from clients cannot grow /metrics without bound: past the cap they count as _other', async (t) => {
  const h = await startBurrow({ BURROW_MODEL_PRICES: 'offline:priced=1/1' })
  t.teardown(() => h.close())
  const { api } = h
  // The offline provider takes any model name, as OpenAI-compatible servers may.
  let total = 0
  for (let i = 0; i < MAX_MODEL_LABELS + 5; i++) {
    const id = await api.createSession({ model: `offline:m${i}` })
    const r = await api.turn(id, { input: 'x' })
    t.equal(r.status, 200)
    if (i >= MAX_MODEL_LABELS) total += r.body.usage.input_tokens
  }
  const priced = await api.createSession({ model: 'offline:priced' })
  t.equal((await api.turn(priced, { input: 'x' })).status, 200)
  const m = metrics((await api.get('/metrics')).body)
  const models = new Set([...m.keys()].filter((k) => k.startsWith('burrow_llm_tokens_total{')).map((k) => /model="([^"]*)"/.exec(k)![1]))
  t.equal(models.size, MAX_MODEL_LABELS + 2, 'the first models, _other, and the priced one')
  t.ok(models.has('m0') && models.has(`m${MAX_MODEL_LABELS - 1}`) && !models.has(`m${MAX_MODEL_LABELS}`))
  t.equal(m.get('burrow_llm_tokens_total{provider="offline",model="_other",type="input"}'), total, 'the rest are counted, not dropped')
  t.ok(m.get('burrow_llm_cost_usd_total{provider="offline",model="priced"}')! > 0, 'a priced model keeps its name and cost')
})
