/**
 * The canonical conversation model, provider-neutral. Providers translate it to
 * their wire format; the event log and snapshots store it as is. The TypeBox schemas are
 * the definition (requests are validated against them, the OpenAPI document and the MCP
 * tool schemas are generated from them); the TypeScript types are derived with `Static`.
 */
import { Type, type Static } from 'typebox'

const Strict = { additionalProperties: false } as const

export const TextBlockSchema = Type.Object({ type: Type.Literal('text'), text: Type.String() }, Strict)
export type TextBlock = Static<typeof TextBlockSchema>

export const ImageBlockSchema = Type.Object(
  {
    type: Type.Literal('image'),
    source: Type.Union([
      Type.Object(
        { type: Type.Literal('base64'), media_type: Type.String({ pattern: '^image/[a-z0-9.+-]+$' }), data: Type.String({ minLength: 1 }) },
        Strict,
      ),
      Type.Object({ type: Type.Literal('url'), url: Type.String({ pattern: '^https?://' }) }, Strict),
    ]),
  },
  Strict,
)
export type ImageBlock = Static<typeof ImageBlockSchema>

export const ToolUseBlockSchema = Type.Object(
  {
    type: Type.Literal('tool_use'),
    id: Type.String(),
    name: Type.String(),
    input: Type.Unknown(),
  },
  Strict,
)
export type ToolUseBlock = Static<typeof ToolUseBlockSchema>

/** What a tool answered: a string, or text and image blocks. */
export const ToolResultContentSchema = Type.Union([Type.String(), Type.Array(Type.Union([TextBlockSchema, ImageBlockSchema]))])

export const ToolResultBlockSchema = Type.Object(
  {
    type: Type.Literal('tool_result'),
    tool_use_id: Type.String(),
    content: ToolResultContentSchema,
    is_error: Type.Optional(Type.Boolean()),
  },
  Strict,
)
export type ToolResultBlock = Static<typeof ToolResultBlockSchema>

export const ContentBlockSchema = Type.Union([TextBlockSchema, ImageBlockSchema, ToolUseBlockSchema, ToolResultBlockSchema])
export type ContentBlock = Static<typeof ContentBlockSchema>

/** A user message holds text/image blocks, or only tool_result blocks (a tool-results message). */
export const MessageSchema = Type.Object(
  {
    role: Type.Union([Type.Literal('user'), Type.Literal('assistant')]),
    content: Type.Array(ContentBlockSchema),
  },
  Strict,
)
export type Message = Static<typeof MessageSchema>

// Static<> of an object open to any property is only its named properties: the index
// signature is stated here, the JSON Schema is TypeBox's own.
export const ObjectSchemaSchema = Type.Unsafe<{ type: 'object' } & Record<string, unknown>>(
  Type.Object(
    { type: Type.Literal('object') },
    { additionalProperties: true, description: 'JSON Schema of the tool input (an object schema).' },
  ),
)

/** A tool the model may call. Client tools (those a session is created with) pause the turn (`requires_action`). */
export const ToolDefinitionSchema = Type.Object(
  {
    name: Type.String({ pattern: '^[a-zA-Z0-9_-]{1,64}$' }),
    description: Type.Optional(Type.String({ maxLength: 4096 })),
    input_schema: ObjectSchemaSchema,
  },
  Strict,
)
export type ToolDefinition = Static<typeof ToolDefinitionSchema>

export const ToolCallSchema = Type.Object({ id: Type.String(), name: Type.String(), input: Type.Unknown() })
export type ToolCall = Static<typeof ToolCallSchema>

/** A client's answer to one pending tool call of a paused turn. */
export const ToolResultInputSchema = Type.Object(
  {
    tool_call_id: Type.String({ minLength: 1, description: 'The id of the pending tool call this answers.' }),
    content: Type.Union([Type.String(), Type.Array(Type.Union([TextBlockSchema, ImageBlockSchema]))], {
      description: 'The tool output: a string, or text and image blocks.',
    }),
    is_error: Type.Optional(Type.Boolean({ description: 'True when the tool failed.' })),
  },
  Strict,
)
export type ToolResultInput = Static<typeof ToolResultInputSchema>

export function textOf(content: readonly ContentBlock[] | string): string {
  if (typeof content === 'string') return content
  let out = ''
  for (const b of content) if (b.type === 'text') out += b.text
  return out
}

export function toolUsesOf(message: Message): ToolUseBlock[] {
  return message.content.filter((b): b is ToolUseBlock => b.type === 'tool_use')
}

export function isToolResultMessage(message: Message): boolean {
  return message.role === 'user' && message.content.length > 0 && message.content.every((b) => b.type === 'tool_result')
}

/** A history problem found by {@link checkHistory}. */
export interface HistoryProblem {
  index: number
  problem: string
}

/**
 * Checks what every provider requires of a history: each assistant tool_use is answered
 * by a tool_result in the very next message, each tool_result answers a tool_use of the
 * message right before it, and tool ids are unique. Returns the first problem, or null.
 */
export function checkHistory(messages: readonly Message[]): HistoryProblem | null {
  const seen = new Set<string>()
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!
    const prev = i > 0 ? messages[i - 1]! : undefined
    const expected = prev && prev.role === 'assistant' ? new Set(toolUsesOf(prev).map((b) => b.id)) : new Set<string>()
    const answered = new Set<string>()
    for (const b of m.content) {
      if (b.type === 'tool_use') {
        if (m.role !== 'assistant') return { index: i, problem: `tool_use ${b.id} in a ${m.role} message` }
        if (seen.has(b.id)) return { index: i, problem: `duplicate tool_use id ${b.id}` }
        seen.add(b.id)
      } else if (b.type === 'tool_result') {
        if (m.role !== 'user') return { index: i, problem: `tool_result in an ${m.role} message` }
        if (!expected.has(b.tool_use_id)) return { index: i, problem: `tool_result ${b.tool_use_id} without its tool_use` }
        if (answered.has(b.tool_use_id)) return { index: i, problem: `duplicate tool_result ${b.tool_use_id}` }
        answered.add(b.tool_use_id)
      }
    }
    for (const id of expected) {
      if (!answered.has(id)) return { index: i, problem: `tool_use ${id} without its tool_result` }
    }
  }
  const last = messages[messages.length - 1]
  if (last && last.role === 'assistant') {
    const open = toolUsesOf(last)
    if (open.length > 0) return { index: messages.length - 1, problem: `tool_use ${open[0]!.id} without its tool_result` }
  }
  return null
}
