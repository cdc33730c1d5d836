/**
 * The canonical conversation model, provider-neutral. Providers translate it to
 * their wire format; the event log and snapshots store it as is.
 */
export interface TextBlock { type: 'text'; text: string }

export interface ImageBlock {
  type: 'image'
  source: { type: 'base64'; media_type: string; data: string } | { type: 'url'; url: string }
}

export interface ToolUseBlock { type: 'tool_use'; id: string; name: string; input: unknown }

export interface ToolResultBlock {
  type: 'tool_result'
  tool_use_id: string
  content: string | Array<TextBlock | ImageBlock>
  is_error?: boolean
}

export type ContentBlock = TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock

/** A user message holds text/image blocks, or only tool_result blocks (a tool-results message). */
export interface Message {
  role: 'user' | 'assistant'
  content: ContentBlock[]
}

/** A tool the model may call. `executor: 'client'` tools pause the turn (`requires_action`). */
export interface ToolDefinition {
  name: string
  description?: string
  input_schema: { type: 'object' } & Record<string, unknown>
}

export interface ToolCall { id: string; name: string; input: unknown }

export interface ToolResultInput { tool_call_id: string; content: string | Array<TextBlock | ImageBlock>; is_error?: boolean }

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
export interface HistoryProblem { index: number; problem: string }

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
