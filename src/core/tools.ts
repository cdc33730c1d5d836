import type { ContentBlock, ToolDefinition } from './messages.js'

export interface ToolContext {
  tenant: string
  sessionId: string
  turn: number
  signal: AbortSignal
}

export interface ToolOutput { content: string | ContentBlock[]; is_error?: boolean }

/** A tool the service executes inside the agent loop (no `requires_action`), e.g. `memory_search`. */
export interface BuiltinTool {
  readonly definition: ToolDefinition
  /** Offered to a session when this returns true (e.g. only when memory is on). */
  enabledFor(session: { memory: boolean }): boolean
  execute(input: unknown, ctx: ToolContext): Promise<ToolOutput>
}
