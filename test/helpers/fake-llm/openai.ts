// OpenAI Chat Completions (+ embeddings) wire format for the fake LLM server.
import { createHash } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import { FakeRequestError, fragments, chunks, isObject, typeName, type Rendered, type ResolvedStep } from './common.js'

const ROLES = ['system', 'developer', 'user', 'assistant', 'tool', 'function']

export function openaiErrorBody(status: number, message: string, param: string | null = null) {
  const type = status === 429 ? 'rate_limit_error' : status >= 500 ? 'server_error' : 'invalid_request_error'
  const code = status === 401 ? 'invalid_api_key' : status === 429 ? 'rate_limit_exceeded' : null
  return { error: { message, type, param, code } }
}

/** Returns an error message if the Authorization header does not carry `key`. */
export function openaiAuthError(headers: IncomingHttpHeaders, key: string): string | undefined {
  const auth = headers.authorization
  if (!auth) {
    return "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
  }
  const m = /^Bearer (.+)$/.exec(auth)
  if (!m || m[1] !== key) {
    const shown = (m?.[1] ?? auth).slice(0, 6)
    return `Incorrect API key provided: ${shown}****. You can find your API key at https://platform.openai.com/account/api-keys.`
  }
  return undefined
}

export const OPENAI_BAD_BODY =
  "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"

function required(name: string): never {
  throw new FakeRequestError(`Missing required parameter: '${name}'.`, name)
}
function badType(name: string, expected: string, got: unknown): never {
  throw new FakeRequestError(`Invalid type for '${name}': expected ${expected}, but got ${typeName(got)} instead.`, name)
}

export function validateOpenAi(body: unknown): asserts body is Record<string, any> {
  if (!isObject(body)) throw new FakeRequestError(OPENAI_BAD_BODY)
  if (typeof body.model !== 'string' || body.model === '') {
    throw new FakeRequestError('you must provide a model parameter')
  }
  const messages = body.messages
  if (messages === undefined) required('messages')
  if (!Array.isArray(messages)) badType('messages', 'an array of objects', messages)
  if (messages.length === 0) {
    throw new FakeRequestError(
      "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
      'messages',
    )
  }
  for (const k of ['max_tokens', 'max_completion_tokens']) {
    const v = body[k]
    if (v !== undefined && v !== null && (!Number.isInteger(v) || v < 1)) {
      badType(k, 'a positive integer', v)
    }
  }
  if (body.stream_options != null && body.stream !== true) {
    throw new FakeRequestError("The 'stream_options' parameter is only allowed when 'stream' is enabled.", 'stream_options')
  }
  validateTools(body.tools)
  validateSampling(body)
  validateMessages(messages)
}

/** The sampling and shaping fields, as the API checks them. */
function validateSampling(body: Record<string, any>): void {
  const range = (k: string, max: number) => {
    const v = body[k]
    if (v !== undefined && (typeof v !== 'number' || v < 0 || v > max))
      throw new FakeRequestError(`Invalid '${k}': number must be between 0 and ${max}.`, k)
  }
  range('temperature', 2)
  range('top_p', 1)
  const stop = body.stop
  if (
    stop !== undefined &&
    typeof stop !== 'string' &&
    !(Array.isArray(stop) && stop.length <= 4 && stop.every((x) => typeof x === 'string'))
  )
    badType('stop', 'a string or an array of at most 4 strings', stop)
  if (body.tool_choice !== undefined) {
    if (!Array.isArray(body.tools) || body.tools.length === 0)
      throw new FakeRequestError(
        "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
        'tool_choice',
      )
    const c = body.tool_choice
    const named = isObject(c) && c.type === 'function' && isObject(c.function) && typeof c.function.name === 'string'
    if (!['auto', 'none', 'required'].includes(c) && !named) badType('tool_choice', "'auto', 'none', 'required' or a named function", c)
  }
  const f = body.response_format
  if (f !== undefined) {
    if (!isObject(f) || !['text', 'json_object', 'json_schema'].includes(f.type)) badType('response_format', 'a response format', f)
    if (f.type === 'json_schema' && (!isObject(f.json_schema) || typeof f.json_schema.name !== 'string' || !isObject(f.json_schema.schema)))
      required('response_format.json_schema.name')
  }
  if (body.reasoning_effort !== undefined && !['minimal', 'low', 'medium', 'high'].includes(body.reasoning_effort))
    throw new FakeRequestError(`Invalid value: '${String(body.reasoning_effort)}'.`, 'reasoning_effort')
}

function validateTools(tools: unknown): void {
  if (tools === undefined || tools === null) return
  if (!Array.isArray(tools)) badType('tools', 'an array of objects', tools)
  tools.forEach((tool, i) => {
    if (!isObject(tool)) badType(`tools[${i}]`, 'an object', tool)
    if (tool.type !== 'function') {
      throw new FakeRequestError(
        `Invalid value: '${String(tool.type)}'. Supported values are: 'function' and 'custom'.`,
        `tools[${i}].type`,
      )
    }
    if (!isObject(tool.function)) required(`tools[${i}].function`)
    const name = tool.function.name
    if (typeof name !== 'string') required(`tools[${i}].function.name`)
    if (!/^[a-zA-Z0-9_-]{1,64}$/.test(name)) {
      throw new FakeRequestError(
        `Invalid 'tools[${i}].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.`,
        `tools[${i}].function.name`,
      )
    }
  })
}

function validateMessages(messages: unknown[]): void {
  const seenIds = new Set<string>()
  /** tool_call_ids of the last assistant message not yet answered by a `tool` message */
  let open: Set<string> | undefined

  const closeOpen = (i: number) => {
    if (open && open.size > 0) {
      throw new FakeRequestError(
        `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...open].join(', ')}`,
        `messages.[${i}].role`,
      )
    }
    open = undefined
  }

  messages.forEach((m, i) => {
    const at = `messages[${i}]`
    if (!isObject(m)) badType(at, 'an object', m)
    if (typeof m.role !== 'string') required(`${at}.role`)
    if (!ROLES.includes(m.role)) {
      throw new FakeRequestError(
        `Invalid value: '${m.role}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.`,
        `${at}.role`,
      )
    }
    if (m.role !== 'tool') closeOpen(i)

    if (m.role === 'tool') {
      if (typeof m.tool_call_id !== 'string') required(`${at}.tool_call_id`)
      if (m.content === undefined) required(`${at}.content`)
      if (!open || !open.has(m.tool_call_id)) {
        throw new FakeRequestError(
          "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
          `${at}.role`,
        )
      }
      open.delete(m.tool_call_id)
      return
    }
    if (m.role === 'assistant') {
      const calls = m.tool_calls
      if (calls === undefined || calls === null) {
        if (m.content === undefined || m.content === null) required(`${at}.content`)
        return
      }
      if (!Array.isArray(calls)) badType(`${at}.tool_calls`, 'an array of objects', calls)
      if (calls.length === 0) {
        throw new FakeRequestError(
          `Invalid '${at}.tool_calls': empty array. Expected an array with minimum length 1, but got an empty array instead.`,
          `${at}.tool_calls`,
        )
      }
      open = new Set()
      calls.forEach((c, j) => {
        const cat = `${at}.tool_calls[${j}]`
        if (!isObject(c)) badType(cat, 'an object', c)
        if (typeof c.id !== 'string') required(`${cat}.id`)
        if (c.type !== 'function') required(`${cat}.type`)
        if (!isObject(c.function)) required(`${cat}.function`)
        if (typeof c.function.name !== 'string') required(`${cat}.function.name`)
        if (typeof c.function.arguments !== 'string') {
          badType(`${cat}.function.arguments`, 'a string', c.function.arguments)
        }
        if (seenIds.has(c.id)) {
          throw new FakeRequestError(
            `Duplicate value for 'tool_call_id' of ${c.id} in message[${i}]. Please ensure all 'tool_call_id' values are unique.`,
            `${cat}.id`,
          )
        }
        seenIds.add(c.id)
        open!.add(c.id)
      })
      return
    }
    if (m.content === undefined || m.content === null) required(`${at}.content`)
  })
  closeOpen(messages.length)
}

/** Text of the last user message (text parts joined). */
export function openaiEcho(body: Record<string, any>): string {
  const messages = body.messages as any[]
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]
    if (m?.role !== 'user') continue
    if (typeof m.content === 'string') return m.content
    if (Array.isArray(m.content)) {
      return m.content
        .filter((p: any) => p?.type === 'text' && typeof p.text === 'string')
        .map((p: any) => p.text)
        .join('')
    }
    return ''
  }
  return ''
}

export function renderOpenAi(s: ResolvedStep, ctx: { id: string; model: string; created: number; includeUsage: boolean }): Rendered {
  const usage = {
    prompt_tokens: s.usage.input_tokens,
    completion_tokens: s.usage.output_tokens,
    total_tokens: s.usage.input_tokens + s.usage.output_tokens,
    prompt_tokens_details: { cached_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0 },
  }
  const head = (object: string) => ({
    id: ctx.id,
    object,
    created: ctx.created,
    model: ctx.model,
    system_fingerprint: 'fp_fake',
  })
  const hasTools = s.toolCalls.length > 0
  const message: Record<string, unknown> = {
    role: 'assistant',
    content: s.text ?? (hasTools ? null : ''),
    refusal: null,
  }
  if (hasTools) {
    message.tool_calls = s.toolCalls.map((c) => ({
      id: c.id,
      type: 'function',
      function: { name: c.name, arguments: c.args },
    }))
  }
  const json = {
    ...head('chat.completion'),
    choices: [{ index: 0, message, logprobs: null, finish_reason: s.stopReason }],
    usage,
  }

  const frame = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`
  const chunk = (delta: unknown, finish: string | null = null) =>
    frame({
      ...head('chat.completion.chunk'),
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(ctx.includeUsage ? { usage: null } : {}),
    })
  const frames = [chunk({ role: 'assistant', content: s.text !== undefined ? '' : null, refusal: null })]
  for (const piece of chunks(s.text ?? '', s.chunkSize)) frames.push(chunk({ content: piece }))
  s.toolCalls.forEach((c, index) => {
    frames.push(
      chunk({
        tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }],
      }),
    )
    for (const piece of fragments(c.args, s.chunkSize)) {
      frames.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }))
    }
  })
  frames.push(chunk({}, s.stopReason))
  if (ctx.includeUsage) {
    frames.push(frame({ ...head('chat.completion.chunk'), choices: [], usage }))
  }
  return {
    json,
    frames,
    terminator: ['data: [DONE]\n\n'],
    badFrame: `data: {"id":"${ctx.id}","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"oo\n\n`,
  }
}

// ---- embeddings -------------------------------------------------------------

export function embeddingFor(text: string): number[] {
  const hash = createHash('sha256').update(text).digest()
  const v = Array.from({ length: 8 }, (_, i) => hash.readUInt16BE(i * 2) / 32767.5 - 1)
  const norm = Math.hypot(...v) || 1
  return v.map((x) => Math.fround(x / norm))
}

export function handleEmbeddings(body: unknown): unknown {
  if (!isObject(body)) throw new FakeRequestError(OPENAI_BAD_BODY)
  if (typeof body.model !== 'string' || body.model === '') {
    throw new FakeRequestError('you must provide a model parameter')
  }
  const input = body.input
  if (input === undefined) required('input')
  const texts: unknown[] = Array.isArray(input) ? input : [input]
  if (texts.length === 0 || texts.some((x) => typeof x !== 'string' || x === '')) {
    throw new FakeRequestError(
      "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.",
      'input',
    )
  }
  const base64 = body.encoding_format === 'base64'
  const data = (texts as string[]).map((t, index) => {
    const vec = embeddingFor(t)
    const embedding = base64 ? Buffer.from(new Float32Array(vec).buffer).toString('base64') : vec
    return { object: 'embedding', index, embedding }
  })
  const tokens = (texts as string[]).reduce((n, t) => n + Math.ceil(t.length / 4), 0)
  return { object: 'list', data, model: body.model, usage: { prompt_tokens: tokens, total_tokens: tokens } }
}
