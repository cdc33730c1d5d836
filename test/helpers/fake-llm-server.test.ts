import t, { type Test } from 'tap'
import { startFakeLlm, embeddingFor, type FakeLlmServer } from './fake-llm-server.js'

const OPENAI_KEY = 'sk-test-openai'
const ANTHROPIC_KEY = 'sk-ant-test'

const srv: FakeLlmServer = await startFakeLlm({ openaiKey: OPENAI_KEY, anthropicKey: ANTHROPIC_KEY })
t.teardown(() => srv.close())

// ---- client helpers -----------------------------------------------------------

const oaHeaders = { 'content-type': 'application/json', authorization: `Bearer ${OPENAI_KEY}` }
const anHeaders = {
  'content-type': 'application/json',
  'x-api-key': ANTHROPIC_KEY,
  'anthropic-version': '2023-06-01',
}

function post(path: string, body: unknown, headers: Record<string, string>, signal?: AbortSignal) {
  return fetch(srv.url + path, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: signal ?? AbortSignal.timeout(2000),
  })
}
const openai = (body: unknown, signal?: AbortSignal) => post('/v1/chat/completions', body, oaHeaders, signal)
const anthropic = (body: unknown, signal?: AbortSignal) => post('/v1/messages', body, anHeaders, signal)

interface Frame {
  event?: string
  data: string
}
/** Structural SSE parse: frames are separated by blank lines; fields are `name: value` lines. */
function parseSse(text: string): Frame[] {
  return text
    .split(/\r?\n\r?\n/)
    .filter((f) => f.trim() !== '')
    .map((f) => {
      const frame: Frame = { data: '' }
      const data: string[] = []
      for (const line of f.split(/\r?\n/)) {
        const m = /^([a-z]+): ?(.*)$/.exec(line)
        if (!m) throw new Error(`bad SSE line: ${line}`)
        if (m[1] === 'event') frame.event = m[2]
        else if (m[1] === 'data') data.push(m[2] ?? '')
      }
      frame.data = data.join('\n')
      return frame
    })
}
const dataJson = (frames: Frame[]) => frames.filter((f) => f.data !== '[DONE]').map((f) => JSON.parse(f.data))

const oaBody = (extra: Record<string, unknown> = {}) => ({
  model: 'gpt-test',
  messages: [{ role: 'user', content: 'hi' }],
  ...extra,
})
const anBody = (extra: Record<string, unknown> = {}) => ({
  model: 'claude-test',
  max_tokens: 100,
  messages: [{ role: 'user', content: 'hi' }],
  ...extra,
})

const weather = { name: 'get_weather', input: { city: 'Paris', units: 'metric' } }
const time = { name: 'get_time', input: { tz: 'Europe/Paris' } }

// ---- OpenAI -------------------------------------------------------------------

t.test('openai: echo default, non-streaming', async (t) => {
  const res = await openai(
    oaBody({
      messages: [
        { role: 'system', content: 'sys' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'hello ' },
            { type: 'text', text: 'world' },
          ],
        },
      ],
    }),
  )
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /application\/json/)
  const j: any = await res.json()
  t.match(j, {
    id: /^chatcmpl-/,
    object: 'chat.completion',
    created: Number,
    model: 'gpt-test',
    choices: [{ index: 0, message: { role: 'assistant', content: 'echo: hello world' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: Number, completion_tokens: Number, total_tokens: Number },
  })
  t.equal(j.usage.total_tokens, j.usage.prompt_tokens + j.usage.completion_tokens)
  t.notOk('tool_calls' in j.choices[0].message)
})

t.test('openai: non-streaming parallel tool calls, default usage', async (t) => {
  srv.enqueue({ toolCalls: [weather, { ...time, id: 'call_fixed' }] })
  const body = oaBody()
  const res = await openai(body)
  const j: any = await res.json()
  const msg = j.choices[0].message
  t.equal(msg.content, null)
  t.equal(j.choices[0].finish_reason, 'tool_calls')
  t.equal(msg.tool_calls.length, 2)
  t.match(msg.tool_calls[0], { id: /^call_/, type: 'function', function: { name: 'get_weather' } })
  t.same(JSON.parse(msg.tool_calls[0].function.arguments), weather.input)
  t.equal(msg.tool_calls[1].id, 'call_fixed')
  t.equal(j.usage.prompt_tokens, Math.ceil(JSON.stringify(body).length / 4))
  t.equal(j.usage.completion_tokens, 20)
})

t.test('openai: streaming text + parallel tool calls with include_usage', async (t) => {
  const text = 'Let me check two things for you.'
  srv.enqueue({ text, toolCalls: [weather, time], usage: { input_tokens: 11, output_tokens: 22 } })
  const res = await openai(oaBody({ stream: true, stream_options: { include_usage: true } }))
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^text\/event-stream/)
  const frames = parseSse(await res.text())
  t.equal(frames.at(-1)?.data, '[DONE]')
  t.ok(frames.every((f) => f.event === undefined))
  const chunks = dataJson(frames)
  for (const c of chunks) t.match(c, { id: /^chatcmpl-/, object: 'chat.completion.chunk', model: 'gpt-test' })

  t.match(chunks[0].choices[0].delta, { role: 'assistant' })
  const usageChunk = chunks.at(-1)
  t.same(usageChunk.choices, [])
  t.match(usageChunk.usage, { prompt_tokens: 11, completion_tokens: 22, total_tokens: 33 })
  const body = chunks.slice(0, -1)
  t.ok(
    body.every((c) => c.usage === null),
    'usage: null on every other chunk',
  )
  t.equal(body.at(-1).choices[0].finish_reason, 'tool_calls')
  t.ok(body.slice(0, -1).every((c) => c.choices[0].finish_reason === null))

  let gotText = ''
  const calls: Array<{ id: string; name: string; args: string; fragments: number }> = []
  for (const c of body) {
    const d = c.choices[0].delta
    if (typeof d.content === 'string') gotText += d.content
    for (const tc of d.tool_calls ?? []) {
      if (tc.id !== undefined) {
        t.equal(tc.index, calls.length, 'new call gets the next index')
        t.equal(tc.type, 'function')
        calls.push({ id: tc.id, name: tc.function.name, args: tc.function.arguments ?? '', fragments: 0 })
      } else {
        t.notOk('name' in (tc.function ?? {}), 'fragments carry arguments only')
        const call = calls[tc.index]!
        call.args += tc.function.arguments
        call.fragments++
      }
    }
  }
  t.equal(gotText, text)
  t.ok(body.filter((c) => typeof c.choices[0].delta.content === 'string' && c.choices[0].delta.content).length > 1)
  t.equal(calls.length, 2)
  t.same(
    calls.map((c) => c.name),
    ['get_weather', 'get_time'],
  )
  t.same(JSON.parse(calls[0]!.args), weather.input)
  t.same(JSON.parse(calls[1]!.args), time.input)
  t.ok(
    calls.every((c) => c.fragments >= 2),
    'arguments split across several chunks',
  )
  t.not(calls[0]!.id, calls[1]!.id)
})

t.test('openai: streaming without include_usage has no usage chunk', async (t) => {
  srv.enqueue({ text: 'short' })
  const frames = parseSse(await (await openai(oaBody({ stream: true }))).text())
  const chunks = dataJson(frames)
  t.equal(frames.at(-1)?.data, '[DONE]')
  t.ok(chunks.every((c) => !('usage' in c) && c.choices.length === 1))
  t.equal(chunks.at(-1).choices[0].finish_reason, 'stop')
})

t.test('openai: rawArguments are sent verbatim', async (t) => {
  srv.enqueue({ toolCalls: [{ name: 'x', input: {}, rawArguments: '{"a":1' }] })
  const j: any = await (await openai(oaBody())).json()
  t.equal(j.choices[0].message.tool_calls[0].function.arguments, '{"a":1')
})

// ---- Anthropic ----------------------------------------------------------------

t.test('anthropic: echo default, non-streaming (tool results ignored)', async (t) => {
  const res = await anthropic(
    anBody({
      system: [{ type: 'text', text: 'sys' }],
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'f', input: {} }] },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: 'ignored' },
            { type: 'text', text: 'and ' },
            { type: 'text', text: 'then?' },
          ],
        },
      ],
    }),
  )
  t.equal(res.status, 200)
  const j: any = await res.json()
  t.match(j, {
    id: /^msg_/,
    type: 'message',
    role: 'assistant',
    model: 'claude-test',
    content: [{ type: 'text', text: 'echo: and then?' }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: Number, output_tokens: Number },
  })
})

t.test('anthropic: non-streaming tool use', async (t) => {
  srv.enqueue({ text: 'Checking.', toolCalls: [weather, { ...time, id: 'toolu_fixed' }] })
  const j: any = await (await anthropic(anBody())).json()
  t.equal(j.stop_reason, 'tool_use')
  t.match(j.content, [
    { type: 'text', text: 'Checking.' },
    { type: 'tool_use', id: /^toolu_/, name: 'get_weather', input: weather.input },
    { type: 'tool_use', id: 'toolu_fixed', name: 'get_time', input: time.input },
  ])
  t.equal(j.usage.output_tokens, Math.ceil('Checking.'.length / 4) + 20)
})

t.test('anthropic: streaming text + parallel tool use', async (t) => {
  const text = 'Looking that up for you now.'
  srv.enqueue({ text, toolCalls: [weather, time], usage: { input_tokens: 7, output_tokens: 42 } })
  const res = await anthropic(anBody({ stream: true }))
  t.match(res.headers.get('content-type'), /^text\/event-stream/)
  const frames = parseSse(await res.text())
  const events = frames.map((f) => ({ event: f.event, data: JSON.parse(f.data) }))
  for (const e of events) t.equal(e.event, e.data.type, 'event name matches data.type')
  const names = events.map((e) => e.event)
  t.equal(names[0], 'message_start')
  t.equal(names.at(-1), 'message_stop')
  t.equal(names.at(-2), 'message_delta')
  t.ok(names.includes('ping'))
  t.match(events[0]!.data.message, {
    id: /^msg_/,
    type: 'message',
    role: 'assistant',
    model: 'claude-test',
    content: [],
    stop_reason: null,
    usage: { input_tokens: 7, output_tokens: 1 },
  })
  t.same(events.at(-2)!.data.delta, { stop_reason: 'tool_use', stop_sequence: null })
  t.same(events.at(-2)!.data.usage, { output_tokens: 42 })

  // reassemble blocks by index
  const blocks: any[] = []
  const open = new Set<number>()
  let jsonDeltas = 0
  for (const { data } of events) {
    if (data.type === 'content_block_start') {
      t.equal(data.index, blocks.length)
      blocks.push({ ...data.content_block, partial: '' })
      open.add(data.index)
    } else if (data.type === 'content_block_delta') {
      t.ok(open.has(data.index), 'delta for an open block')
      const b = blocks[data.index]
      if (data.delta.type === 'text_delta') b.text += data.delta.text
      else {
        t.equal(data.delta.type, 'input_json_delta')
        b.partial += data.delta.partial_json
        jsonDeltas++
      }
    } else if (data.type === 'content_block_stop') {
      t.ok(open.delete(data.index))
    }
  }
  t.equal(open.size, 0)
  t.equal(blocks.length, 3)
  t.match(blocks[0], { type: 'text', text })
  t.match(blocks[1], { type: 'tool_use', id: /^toolu_/, name: 'get_weather', input: {} })
  t.match(blocks[2], { type: 'tool_use', name: 'get_time' })
  t.same(JSON.parse(blocks[1].partial), weather.input)
  t.same(JSON.parse(blocks[2].partial), time.input)
  t.ok(jsonDeltas >= 4, 'tool input split across several deltas')
})

// ---- scripted errors ----------------------------------------------------------

t.test('scripted 429 with retry-after, 500 and 529', async (t) => {
  srv.enqueue({ status: 429, errorMessage: 'slow down', headers: { 'retry-after': '2' } })
  let res = await openai(oaBody({ stream: true }))
  t.equal(res.status, 429)
  t.equal(res.headers.get('retry-after'), '2')
  t.same(await res.json(), {
    error: { message: 'slow down', type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded' },
  })

  srv.enqueue({ status: 500 })
  res = await openai(oaBody())
  t.equal(res.status, 500)
  t.match(await res.json(), { error: { type: 'server_error', message: String } })

  srv.enqueue({ status: 429, headers: { 'retry-after': '1' } }, { status: 529 }, { status: 500 })
  res = await anthropic(anBody())
  t.equal(res.status, 429)
  t.equal(res.headers.get('retry-after'), '1')
  t.match(await res.json(), { type: 'error', error: { type: 'rate_limit_error' } })
  res = await anthropic(anBody({ stream: true }))
  t.equal(res.status, 529)
  t.match(await res.json(), { type: 'error', error: { type: 'overloaded_error' } })
  res = await anthropic(anBody())
  t.match(await res.json(), { type: 'error', error: { type: 'api_error' } })
  t.equal(srv.pending(), 0)
})

// ---- malformed streams ----------------------------------------------------------

t.test('malformed: bad_json', async (t) => {
  srv.enqueue({ api: 'openai', text: 'hello there', malformed: 'bad_json' })
  let frames = parseSse(await (await openai(oaBody({ stream: true }))).text())
  let bad = frames.filter((f) => {
    try {
      JSON.parse(f.data)
      return false
    } catch {
      return f.data !== '[DONE]'
    }
  })
  t.equal(bad.length, 1)

  srv.enqueue({ api: 'anthropic', text: 'hello there', malformed: 'bad_json' })
  frames = parseSse(await (await anthropic(anBody({ stream: true }))).text())
  bad = frames.filter((f) => {
    try {
      JSON.parse(f.data)
      return false
    } catch {
      return true
    }
  })
  t.equal(bad.length, 1)
  t.equal(bad[0]!.event, 'content_block_delta')

  srv.enqueue({ malformed: 'bad_json' })
  await t.rejects((await openai(oaBody())).json(), SyntaxError)
})

t.test('malformed: truncated', async (t) => {
  srv.enqueue({ text: 'a fairly long answer that is cut', malformed: 'truncated' })
  let res = await openai(oaBody({ stream: true }))
  t.equal(res.status, 200)
  await t.rejects(res.text(), 'stream dies mid-way')

  srv.enqueue({ text: 'a fairly long answer that is cut', malformed: 'truncated' })
  res = await anthropic(anBody({ stream: true }))
  await t.rejects(res.text())

  srv.enqueue({ text: 'cut', malformed: 'truncated' })
  res = await anthropic(anBody())
  await t.rejects(res.text())
})

t.test('malformed: no_terminator', async (t) => {
  srv.enqueue({ text: 'no end', malformed: 'no_terminator' })
  let frames = parseSse(await (await openai(oaBody({ stream: true }))).text())
  t.notOk(frames.some((f) => f.data === '[DONE]'))
  t.equal(dataJson(frames).at(-1).choices[0].finish_reason, 'stop')

  srv.enqueue({ text: 'no end', malformed: 'no_terminator' })
  frames = parseSse(await (await anthropic(anBody({ stream: true }))).text())
  t.notOk(frames.some((f) => f.event === 'message_stop'))
  t.equal(frames.at(-1)?.event, 'message_delta')
})

// ---- hangs & delays -----------------------------------------------------------

t.test('hang: headers', async (t) => {
  srv.enqueue({ hang: 'headers' })
  const started = Date.now()
  await t.rejects(openai(oaBody(), AbortSignal.timeout(100)))
  t.ok(Date.now() - started >= 90)
  t.equal(srv.requests.at(-1)?.status, undefined)
})

t.test('hang: body (stream and not)', async (t) => {
  srv.enqueue({ text: 'never finishes', hang: 'body' })
  const ac = new AbortController()
  const res = await openai(oaBody({ stream: true }), ac.signal)
  t.equal(res.status, 200)
  const reader = res.body!.getReader()
  const first = await reader.read()
  t.match(new TextDecoder().decode(first.value), /^data: .*"role":"assistant"/)
  const next = reader.read()
  setTimeout(() => ac.abort(), 50)
  await t.rejects(next)

  srv.enqueue({ text: 'never finishes', hang: 'body' })
  const res2 = await anthropic(anBody(), AbortSignal.timeout(100))
  t.equal(res2.status, 200)
  await t.rejects(res2.text())
})

t.test('delayMs spaces out chunks', async (t) => {
  srv.enqueue({ text: 'abcdefgh', chunkSize: 2, delayMs: 15 })
  const started = Date.now()
  const frames = parseSse(await (await openai(oaBody({ stream: true }))).text())
  t.ok(Date.now() - started >= 15 * (frames.length - 1) - 5)
  srv.enqueue({ text: 'x', delayMs: 40 })
  const s2 = Date.now()
  await (await anthropic(anBody())).json()
  t.ok(Date.now() - s2 >= 35)
})

t.test('close() destroys hanging sockets', async (t) => {
  const s = await startFakeLlm()
  s.enqueue({ hang: 'headers' })
  const pending = fetch(`${s.url}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify(oaBody()),
  })
  while (s.requests.length === 0) await new Promise((r) => setTimeout(r, 5))
  const started = Date.now()
  await s.close()
  t.ok(Date.now() - started < 500)
  await t.rejects(pending)
})

// ---- auth ---------------------------------------------------------------------

t.test('auth failures', async (t) => {
  srv.enqueue({ text: 'must not be consumed' })
  let res = await post('/v1/chat/completions', oaBody(), { 'content-type': 'application/json' })
  t.equal(res.status, 401)
  t.match(await res.json(), { error: { type: 'invalid_request_error', code: 'invalid_api_key', param: null } })
  res = await post('/v1/chat/completions', oaBody(), { authorization: 'Bearer wrong' })
  t.equal(res.status, 401)
  t.match(srv.requests.at(-1), { api: 'openai', rejected: /Incorrect API key/ })

  res = await post('/v1/messages', anBody(), { 'x-api-key': 'wrong', 'anthropic-version': '2023-06-01' })
  t.equal(res.status, 401)
  t.same(await res.json(), { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } })
  res = await post('/v1/messages', anBody(), { 'x-api-key': ANTHROPIC_KEY })
  t.equal(res.status, 400)
  t.match(await res.json(), { type: 'error', error: { type: 'invalid_request_error', message: /anthropic-version/ } })
  t.equal(srv.pending(), 1, 'rejected requests consume no step')

  const open = await startFakeLlm()
  t.teardown(() => open.close())
  res = await fetch(`${open.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(oaBody()) })
  t.equal(res.status, 200, 'no key configured: no auth required')
  await res.arrayBuffer()
  await (await anthropic(anBody())).arrayBuffer() // consume the pending step
})

// ---- scripting ----------------------------------------------------------------

t.test('api-scoped steps', async (t) => {
  srv.enqueue({ api: 'anthropic', text: 'for anthropic' }, { text: 'for anyone' }, { api: 'openai', text: 'for openai' })
  let j: any = await (await openai(oaBody())).json()
  t.equal(j.choices[0].message.content, 'for anyone')
  t.equal(srv.pending(), 2)
  j = await (await openai(oaBody())).json()
  t.equal(j.choices[0].message.content, 'for openai')
  j = await (await openai(oaBody())).json()
  t.equal(j.choices[0].message.content, 'echo: hi', 'anthropic step is skipped by openai')
  j = await (await anthropic(anBody())).json()
  t.equal(j.content[0].text, 'for anthropic')
  t.equal(srv.pending(), 0)
  t.match(srv.requests.at(-1), { api: 'anthropic', path: '/v1/messages', body: { model: 'claude-test' } })
  t.match(srv.requests.at(-1)?.headers, { 'x-api-key': ANTHROPIC_KEY })
})

// ---- validation ---------------------------------------------------------------

async function expect400(t: Test, res: Response, api: 'openai' | 'anthropic', message: RegExp | string) {
  t.equal(res.status, 400)
  const j: any = await res.json()
  const msg = j.error?.message
  if (api === 'openai') t.match(j, { error: { type: 'invalid_request_error', message: String } })
  else t.match(j, { type: 'error', error: { type: 'invalid_request_error', message: String } })
  if (typeof message === 'string') t.equal(msg, message)
  else t.match(msg, message)
  t.equal(srv.requests.at(-1)?.rejected, msg, 'recorded as rejected')
}

t.test('basic request validation', async (t) => {
  srv.enqueue({ text: 'never used' })
  await expect400(t, await openai('{"model": '), 'openai', /could not parse the JSON body/)
  t.equal(srv.requests.at(-1)?.body, '{"model": ')
  await expect400(t, await openai({ messages: [{ role: 'user', content: 'x' }] }), 'openai', /model parameter/)
  await expect400(t, await openai(oaBody({ messages: [] })), 'openai', /empty array/)
  await expect400(t, await openai(oaBody({ messages: 'hi' })), 'openai', /Invalid type for 'messages'/)
  await expect400(t, await openai(oaBody({ messages: [{ role: 'bot', content: 'x' }] })), 'openai', /Invalid value: 'bot'/)
  await expect400(t, await openai(oaBody({ stream_options: { include_usage: true } })), 'openai', /stream_options/)

  await expect400(t, await anthropic('nope'), 'anthropic', /error parsing the body/)
  await expect400(t, await anthropic(anBody({ model: undefined })), 'anthropic', 'model: Field required')
  await expect400(t, await anthropic(anBody({ max_tokens: undefined })), 'anthropic', 'max_tokens: Field required')
  await expect400(t, await anthropic(anBody({ messages: [] })), 'anthropic', /at least one message/)
  await expect400(t, await anthropic(anBody({ messages: {} })), 'anthropic', /valid list/)
  await expect400(
    t,
    await anthropic(
      anBody({
        messages: [
          { role: 'system', content: 's' },
          { role: 'user', content: 'x' },
        ],
      }),
    ),
    'anthropic',
    /Unexpected role "system"/,
  )
  await expect400(
    t,
    await anthropic(anBody({ messages: [{ role: 'assistant', content: 'x' }] })),
    'anthropic',
    /first message must use the "user" role/,
  )
  await expect400(
    t,
    await anthropic(anBody({ messages: [{ role: 'user', content: [{ type: 'text', text: '' }] }] })),
    'anthropic',
    /text content blocks must be non-empty/,
  )
  t.equal(srv.pending(), 1)
  await (await openai(oaBody())).arrayBuffer()
})

t.test('openai tool pairing', async (t) => {
  const call = (id: string, name = 'f') => ({ id, type: 'function', function: { name, arguments: '{}' } })
  const asst = (...ids: string[]) => ({ role: 'assistant', content: null, tool_calls: ids.map((id) => call(id)) })
  const tool = (id: string) => ({ role: 'tool', tool_call_id: id, content: 'ok' })
  const user = { role: 'user', content: 'go' }
  const send = (messages: unknown[]) => openai(oaBody({ messages }))

  await expect400(
    t,
    await send([user, asst('call_a', 'call_b'), tool('call_a'), user]),
    'openai',
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_b",
  )
  await expect400(t, await send([user, asst('call_a')]), 'openai', /did not have response messages: call_a$/)
  const stray = "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
  await expect400(t, await send([user, tool('call_a')]), 'openai', stray)
  await expect400(t, await send([user, asst('call_a'), tool('call_x')]), 'openai', stray)
  await expect400(t, await send([user, asst('call_a'), user, tool('call_a')]), 'openai', /did not have response/)
  await expect400(t, await send([user, asst('call_a'), tool('call_a'), tool('call_a')]), 'openai', stray)
  await expect400(t, await send([user, asst('call_a', 'call_a')]), 'openai', /Duplicate value for 'tool_call_id'/)
  await expect400(t, await send([user, asst('call_a'), tool('call_a'), asst('call_a'), tool('call_a')]), 'openai', /Duplicate/)

  const tools = [{ type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object' } } }]
  const res = await openai(
    oaBody({
      tools,
      messages: [
        { role: 'system', content: 'sys' },
        user,
        { role: 'assistant', content: 'Let me look.', tool_calls: [call('call_1'), call('call_2')] },
        tool('call_2'),
        tool('call_1'),
        asst('call_3'),
        { role: 'tool', tool_call_id: 'call_3', content: [{ type: 'text', text: 'done' }] },
        { role: 'assistant', content: 'All done.' },
        { role: 'user', content: 'thanks' },
      ],
    }),
  )
  t.equal(res.status, 200, 'valid multi-step tool conversation accepted')
  t.equal(((await res.json()) as any).choices[0].message.content, 'echo: thanks')
})

t.test('anthropic tool pairing', async (t) => {
  const use = (id: string) => ({ type: 'tool_use', id, name: 'f', input: {} })
  const result = (id: string) => ({ type: 'tool_result', tool_use_id: id, content: 'ok' })
  const asst = (...ids: string[]) => ({ role: 'assistant', content: ids.map(use) })
  const results = (...ids: string[]) => ({ role: 'user', content: ids.map(result) })
  const user = { role: 'user', content: 'go' }
  const send = (messages: unknown[]) => anthropic(anBody({ messages }))

  await expect400(
    t,
    await send([user, asst('toolu_a', 'toolu_b'), results('toolu_a')]),
    'anthropic',
    'messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_b. Each `tool_use` block must have a corresponding `tool_result` block in the next message.',
  )
  await expect400(t, await send([user, asst('toolu_a'), user]), 'anthropic', /^messages\.1: `tool_use` ids were found/)
  await expect400(
    t,
    await send([user, asst('toolu_a'), { role: 'user', content: [result('toolu_a'), result('toolu_x')] }]),
    'anthropic',
    'messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_x. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.',
  )
  await expect400(
    t,
    await send([{ role: 'user', content: [result('toolu_a')] }]),
    'anthropic',
    /^messages\.0\.content\.0: unexpected `tool_use_id`/,
  )
  await expect400(t, await send([user, asst('toolu_a', 'toolu_a'), results('toolu_a')]), 'anthropic', /ids must be unique/)
  await expect400(
    t,
    await send([user, asst('toolu_a'), results('toolu_a'), asst('toolu_a'), results('toolu_a')]),
    'anthropic',
    /^messages\.3\.content\.0: `tool_use` ids must be unique/,
  )
  await expect400(
    t,
    await send([user, asst('toolu_a'), { role: 'user', content: [{ type: 'text', text: 'hm' }, result('toolu_a')] }]),
    'anthropic',
    /Did not find 1 tool_result block\(s\) at the beginning/,
  )

  const tools = [{ name: 'f', description: 'd', input_schema: { type: 'object', properties: {} } }]
  const res = await anthropic(
    anBody({
      tools,
      system: 'sys',
      messages: [
        user,
        { role: 'assistant', content: [{ type: 'text', text: 'Looking.' }, use('toolu_1'), use('toolu_2')] },
        {
          role: 'user',
          content: [
            result('toolu_2'),
            { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'x' }], is_error: true },
          ],
        },
        asst('toolu_3'),
        { role: 'user', content: [result('toolu_3'), { type: 'text', text: 'thanks' }] },
      ],
    }),
  )
  t.equal(res.status, 200, 'valid multi-step tool conversation accepted')
  t.equal(((await res.json()) as any).content[0].text, 'echo: thanks')
})

// ---- embeddings ---------------------------------------------------------------

t.test('embeddings', async (t) => {
  const res = await post('/v1/embeddings', { model: 'emb', input: ['alpha', 'beta', 'alpha'] }, oaHeaders)
  t.equal(res.status, 200)
  const j: any = await res.json()
  t.match(j, { object: 'list', model: 'emb', usage: { prompt_tokens: Number, total_tokens: Number } })
  t.equal(j.data.length, 3)
  t.same(
    j.data.map((d: any) => d.index),
    [0, 1, 2],
  )
  for (const d of j.data) {
    t.equal(d.object, 'embedding')
    t.equal(d.embedding.length, 8)
    t.ok(d.embedding.every((x: unknown) => typeof x === 'number' && Number.isFinite(x)))
  }
  t.same(j.data[0].embedding, j.data[2].embedding, 'deterministic')
  t.notSame(j.data[0].embedding, j.data[1].embedding)
  t.same(j.data[0].embedding, embeddingFor('alpha'))

  const single: any = await (await post('/v1/embeddings', { model: 'emb', input: 'alpha' }, oaHeaders)).json()
  t.same(single.data[0].embedding, embeddingFor('alpha'))

  const b64: any = await (await post('/v1/embeddings', { model: 'emb', input: 'alpha', encoding_format: 'base64' }, oaHeaders)).json()
  const buf = Buffer.from(b64.data[0].embedding, 'base64')
  t.same(Array.from(new Float32Array(buf.buffer, buf.byteOffset, 8)), embeddingFor('alpha'))

  t.equal((await post('/v1/embeddings', { model: 'emb', input: 'x' }, {})).status, 401)
  t.equal((await post('/v1/embeddings', { model: 'emb', input: [] }, oaHeaders)).status, 400)
})

t.test('unknown route', async (t) => {
  const res = await post('/v1/nope', {}, oaHeaders)
  t.equal(res.status, 404)
  t.match(await res.json(), { error: { type: 'invalid_request_error' } })
})
