import type { ContentBlock, ToolDefinition } from './messages.js'
import type { TraceContext } from './tracing.js'

/** The session a built-in tool runs in: what it may read and change. */
export interface ToolSession {
  notes(): Array<{ key: string; value: string }>
  /** Records a note change as an event of the session (throws INVALID_REQUEST for a bad key or value). */
  setNote(key: string, value: string): Promise<void>
  deleteNote(key: string): Promise<boolean>
}

export interface ToolContext {
  tenant: string
  sessionId: string
  turn: number
  signal: AbortSignal
  session: ToolSession
  /** The turn's span: the parent of spans the tool opens. */
  trace?: TraceContext | undefined
}

export interface ToolOutput {
  content: string | ContentBlock[]
  is_error?: boolean
}

/** A tool the service executes inside the agent loop (no `requires_action`), e.g. `memory_search`. */
export interface BuiltinTool {
  readonly definition: ToolDefinition
  /** Offered to a session when this returns true (e.g. only when memory is on). */
  enabledFor(session: { memory: boolean }): boolean
  execute(input: unknown, ctx: ToolContext): Promise<ToolOutput>
}
