// Anthropic Messages wire format for the fake LLM server.
import type { IncomingHttpHeaders } from 'node:http'
import { FakeRequestError, fragments, chunks, isObject, type Rendered, type ResolvedStep } from './common.js'

const BLOCK_TYPES = ['text', 'image', 'document', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking']

export function anthropicErrorBody(status: number, message: string) {
  const type =
    status === 401
      ? 'authentication_error'
      : status === 403
        ? 'permission_error'
        : status === 404
          ? 'not_found_error'
          : status === 413
            ? 'request_too_large'
            : status === 429
              ? 'rate_limit_error'
              : status === 529
                ? 'overloaded_error'
                : status >= 500
                  ? 'api_error'
                  : 'invalid_request_error'
  return { type: 'error', error: { type, message } }
}

/** Returns [status, message] if the request headers would be refused. */
export function anthropicHeaderError(headers: IncomingHttpHeaders, key: string | undefined): [number, string] | undefined {
  if (key !== undefined) {
    const got = headers['x-api-key']
    if (!got) return [401, 'x-api-key header is required']
    if (got !== key) return [401, 'invalid x-api-key']
  }
  if (!headers['anthropic-version']) return [400, 'anthropic-version: header is required']
  return undefined
}

function fail(message: string): never {
  throw new FakeRequestError(message)
}

export function validateAnthropic(body: unknown): asserts body is Record<string, any> {
  if (!isObject(body)) fail('There was an error parsing the body: expected a JSON object')
  if (typeof body.model !== 'string' || body.model === '') fail('model: Field required')
  if (body.max_tokens === undefined) fail('max_tokens: Field required')
  if (!Number.isInteger(body.max_tokens) || body.max_tokens < 1) {
    fail('max_tokens: Input should be a valid integer greater than or equal to 1')
  }
  const sys = body.system
  if (sys !== undefined && typeof sys !== 'string') {
    if (!Array.isArray(sys)) fail('system: Input should be a valid list')
    sys.forEach((b, i) => {
      if (!isObject(b) || b.type !== 'text' || typeof b.text !== 'string') {
        fail(`system.${i}: Input should be a valid text block`)
      }
    })
  }
  validateTools(body.tools)
  validateSampling(body)
  if (body.messages === undefined) fail('messages: Field required')
  if (!Array.isArray(body.messages)) fail('messages: Input should be a valid list')
  if (body.messages.length === 0) fail('messages: at least one message is required')
  validateMessages(body.messages)
}

/** The sampling and shaping fields, as the API checks them. */
function validateSampling(body: Record<string, any>): void {
  for (const [k, max] of [
    ['temperature', 1],
    ['top_p', 1],
  ] as const) {
    const v = body[k]
    if (v !== undefined && (typeof v !== 'number' || v < 0 || v > max)) fail(`${k}: Input should be less than or equal to ${max}`)
  }
  const stop = body.stop_sequences
  if (stop !== undefined && !(Array.isArray(stop) && stop.every((x) => typeof x === 'string')))
    fail('stop_sequences: Input should be a valid list')
  const c = body.tool_choice
  if (c !== undefined) {
    if (!isObject(c) || !['auto', 'any', 'tool', 'none'].includes(c.type))
      fail('tool_choice: Input tag does not match any of the expected tags')
    if (c.type === 'tool' && typeof c.name !== 'string') fail('tool_choice.tool.name: Field required')
    if (!Array.isArray(body.tools) || body.tools.length === 0) fail('tool_choice may only be specified while providing tools.')
  }
  const o = body.output_config
  if (o !== undefined) {
    if (!isObject(o)) fail('output_config: Input should be a valid dictionary')
    if (o.effort !== undefined && !['low', 'medium', 'high', 'max'].includes(o.effort))
      fail("output_config.effort: Input should be 'low', 'medium', 'high' or 'max'")
    if (o.format !== undefined && (!isObject(o.format) || o.format.type !== 'json_schema' || !isObject(o.format.schema)))
      fail('output_config.format: Input should be a valid json_schema format')
  }
}

function validateTools(tools: unknown): void {
  if (tools === undefined) return
  if (!Array.isArray(tools)) fail('tools: Input should be a valid list')
  const names = new Set<string>()
  tools.forEach((t, i) => {
    if (!isObject(t)) fail(`tools.${i}: Input should be a valid dictionary`)
    if (t.type !== undefined && t.type !== 'custom') return // server tools: not checked
    if (typeof t.name !== 'string' || !/^[a-zA-Z0-9_-]{1,128}$/.test(t.name)) {
      fail(`tools.${i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`)
    }
    if (!isObject(t.input_schema)) fail(`tools.${i}.custom.input_schema: Field required`)
    if (t.input_schema.type !== 'object') fail(`tools.${i}.custom.input_schema.type: Input should be 'object'`)
    if (names.has(t.name)) fail('tools: Tool names must be unique.')
    names.add(t.name)
  })
}

function blocksOf(m: Record<string, any>): any[] {
  return Array.isArray(m.content) ? m.content : []
}

function toolUseIds(m: unknown): string[] {
  if (!isObject(m) || m.role !== 'assistant') return []
  return blocksOf(m)
    .filter((b) => b?.type === 'tool_use')
    .map((b) => b.id as string)
}

function validateMessages(messages: unknown[]): void {
  const seenToolUse = new Set<string>()
  messages.forEach((m, i) => {
    if (!isObject(m)) fail(`messages.${i}: Input should be a valid dictionary`)
    if (m.role === 'system') {
      fail(
        'messages: Unexpected role "system". The Messages API accepts a top-level `system` parameter, not "system" as an input message role.',
      )
    }
    if (m.role !== 'user' && m.role !== 'assistant') {
      fail(`messages.${i}.role: Input should be 'user' or 'assistant'`)
    }
    if (i === 0 && m.role !== 'user') fail('messages: first message must use the "user" role')
    const last = i === messages.length - 1
    if (typeof m.content === 'string') {
      if (m.content === '' && !(last && m.role === 'assistant')) {
        fail(`messages.${i}: all messages must have non-empty content except for the optional final assistant message`)
      }
      return
    }
    if (!Array.isArray(m.content)) fail(`messages.${i}.content: Input should be a valid list`)
    if (m.content.length === 0 && !(last && m.role === 'assistant')) {
      fail(`messages.${i}: all messages must have non-empty content except for the optional final assistant message`)
    }
    m.content.forEach((b: unknown, j: number) => validateBlock(b, `messages.${i}.content.${j}`, m.role))

    if (m.role === 'assistant') {
      m.content.forEach((b: any, j: number) => {
        if (b.type !== 'tool_use') return
        if (seenToolUse.has(b.id)) fail(`messages.${i}.content.${j}: \`tool_use\` ids must be unique`)
        seenToolUse.add(b.id)
      })
      const ids = toolUseIds(m)
      if (ids.length === 0) return
      const next = messages[i + 1]
      const answered = new Set(
        isObject(next) && next.role === 'user'
          ? blocksOf(next)
              .filter((b) => b?.type === 'tool_result')
              .map((b) => b.tool_use_id)
          : [],
      )
      const missing = ids.filter((id) => !answered.has(id))
      if (missing.length > 0) {
        fail(
          `messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`,
        )
      }
      return
    }

    // user message: every tool_result must answer a tool_use of the previous message
    const expected = new Set(toolUseIds(messages[i - 1]))
    const results = new Set<string>()
    m.content.forEach((b: any, j: number) => {
      if (b.type !== 'tool_result') return
      if (!expected.has(b.tool_use_id)) {
        fail(
          `messages.${i}.content.${j}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${b.tool_use_id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`,
        )
      }
      if (results.has(b.tool_use_id)) {
        fail(
          `messages.${i}.content.${j}: each tool_use must have a single result. Found multiple \`tool_result\` blocks with id: ${b.tool_use_id}`,
        )
      }
      results.add(b.tool_use_id)
    })
    // ...and they must come first in the message
    const k = results.size
    if (k > 0 && m.content.slice(0, k).some((b: any) => b.type !== 'tool_result')) {
      fail(
        `messages.${i}: Did not find ${k} tool_result block(s) at the beginning of this message. Messages following tool_use blocks must begin with a matching number of tool_result blocks.`,
      )
    }
  })
}

function validateBlock(b: unknown, at: string, role: 'user' | 'assistant'): void {
  if (!isObject(b)) fail(`${at}: Input should be a valid dictionary`)
  if (!BLOCK_TYPES.includes(b.type)) {
    fail(
      `${at}: Input tag '${String(b.type)}' found using 'type' does not match any of the expected tags: ${BLOCK_TYPES.map((t) => `'${t}'`).join(', ')}`,
    )
  }
  switch (b.type) {
    case 'text':
      if (typeof b.text !== 'string') fail(`${at}.text.text: Field required`)
      if (b.text === '') fail('messages: text content blocks must be non-empty')
      return
    case 'image':
      if (!isObject(b.source)) fail(`${at}.image.source: Field required`)
      return
    case 'tool_use':
      if (role !== 'assistant') fail(`${at}: \`tool_use\` blocks can only be in \`assistant\` messages`)
      if (typeof b.id !== 'string' || !/^[a-zA-Z0-9_-]+$/.test(b.id)) {
        fail(`${at}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'`)
      }
      if (typeof b.name !== 'string' || b.name === '') fail(`${at}.tool_use.name: Field required`)
      if (!isObject(b.input)) fail(`${at}.tool_use.input: Input should be a valid dictionary`)
      return
    case 'tool_result':
      if (role !== 'user') fail(`${at}: \`tool_result\` blocks can only be in \`user\` messages`)
      if (typeof b.tool_use_id !== 'string') fail(`${at}.tool_result.tool_use_id: Field required`)
      if (b.content !== undefined && typeof b.content !== 'string' && !Array.isArray(b.content)) {
        fail(`${at}.tool_result.content: Input should be a valid list`)
      }
      if (b.is_error !== undefined && typeof b.is_error !== 'boolean') {
        fail(`${at}.tool_result.is_error: Input should be a valid boolean`)
      }
      return
  }
}

/** Text of the last user message (text blocks joined; tool results ignored). */
export function anthropicEcho(body: Record<string, any>): string {
  const messages = body.messages as any[]
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]
    if (m?.role !== 'user') continue
    if (typeof m.content === 'string') return m.content
    return blocksOf(m)
      .filter((b) => b?.type === 'text')
      .map((b) => b.text)
      .join('')
  }
  return ''
}

export function renderAnthropic(s: ResolvedStep, ctx: { id: string; model: string }): Rendered {
  const hasTools = s.toolCalls.length > 0
  const withText = s.text !== undefined ? s.text !== '' || !hasTools : !hasTools
  const text = s.text ?? ''
  const content: unknown[] = []
  if (withText) content.push({ type: 'text', text })
  for (const c of s.toolCalls) {
    let input = c.input ?? {}
    try {
      input = JSON.parse(c.args)
    } catch {
      // rawArguments that are not JSON: keep the scripted input
    }
    content.push({ type: 'tool_use', id: c.id, name: c.name, input })
  }
  const base = { id: ctx.id, type: 'message', role: 'assistant', model: ctx.model }
  const json = {
    ...base,
    content,
    stop_reason: s.stopReason,
    stop_sequence: null,
    usage: { input_tokens: s.usage.input_tokens, output_tokens: s.usage.output_tokens },
  }

  const ev = (data: { type: string; [k: string]: unknown }) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`
  const frames = [
    ev({
      type: 'message_start',
      message: {
        ...base,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: s.usage.input_tokens, output_tokens: 1 },
      },
    }),
  ]
  const ping = ev({ type: 'ping' })
  let index = 0
  const block = (start: unknown, deltas: unknown[]) => {
    frames.push(ev({ type: 'content_block_start', index, content_block: start }))
    if (index === 0) frames.push(ping)
    for (const delta of deltas) frames.push(ev({ type: 'content_block_delta', index, delta }))
    frames.push(ev({ type: 'content_block_stop', index }))
    index++
  }
  if (withText) {
    block(
      { type: 'text', text: '' },
      chunks(text, s.chunkSize).map((t) => ({ type: 'text_delta', text: t })),
    )
  }
  for (const c of s.toolCalls) {
    block(
      { type: 'tool_use', id: c.id, name: c.name, input: {} },
      ['', ...fragments(c.args, s.chunkSize)].map((p) => ({ type: 'input_json_delta', partial_json: p })),
    )
  }
  if (index === 0) frames.push(ping)
  frames.push(
    ev({
      type: 'message_delta',
      delta: { stop_reason: s.stopReason, stop_sequence: null },
      usage: { output_tokens: s.usage.output_tokens },
    }),
  )
  return {
    json,
    frames,
    terminator: [ev({ type: 'message_stop' })],
    badFrame: `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"oo\n\n`,
  }
}
