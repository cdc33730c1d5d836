/**
 * zod mirrors of the wire requests (src/core/wire.ts) as MCP tool input schemas. The
 * SDK advertises them as JSON Schema in `tools/list`; the MCP surface validates tool
 * arguments with them. Strict objects, like the REST bodies: an unknown property is an
 * error, never silently dropped. test/surfaces/mcp checks they name the wire fields.
 */
import * as z from 'zod'
import { BurrowError } from '../../core/errors.js'

const SessionId = z.guid().describe('Session id (UUIDv7), as returned by session_create.')

const Metadata = z.record(z.string().max(128), z.string().max(4096))
  .refine((m) => Object.keys(m).length <= 64, 'must have at most 64 entries')

const MetadataFilter = z.record(z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/), z.string().max(256))
  .refine((m) => Object.keys(m).length <= 16, 'must have at most 16 entries')
  .describe('Only entries whose metadata has every one of these KEY: VALUE pairs.')

const Compaction = z.strictObject({
  auto_compact_threshold: z.int().min(1).optional().describe('Compact when the history reaches this many tokens.'),
  recent_turn_budget: z.int().min(0).optional().describe('Complete recent turns kept verbatim after compaction.'),
  max_summary_tokens: z.int().min(1).max(200_000).optional().describe('Token limit of the compaction summary.'),
  min_turns_between_compactions: z.int().min(0).optional().describe('Loop guard: turns that must pass between compactions.'),
  max_history_messages: z.int().min(2).optional().describe('Also compact when the history has more messages than this.'),
})

const ToolDefinition = z.strictObject({
  name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/),
  description: z.string().max(4096).optional(),
  input_schema: z.looseObject({ type: z.literal('object') }).describe('JSON Schema of the tool input (an object schema).'),
})

const TextBlock = z.strictObject({ type: z.literal('text'), text: z.string() })

const ToolResult = z.strictObject({
  tool_call_id: z.string().min(1).describe('The id of the pending tool call this answers.'),
  content: z.union([z.string(), z.array(TextBlock)]).describe('The tool output: a string or text blocks.'),
  is_error: z.boolean().optional().describe('True when the tool failed.'),
})

const MaxTokens = z.int().min(1).max(200_000).optional().describe('Output token limit per LLM call of this turn.')

export const CreateSessionInput = z.strictObject({
  model: z.string().regex(/^[a-zA-Z0-9_.-]+:.+$/).max(256).optional()
    .describe('"provider:model", e.g. "anthropic:claude-sonnet-4-5", "openai:gpt-4o-mini" or "offline:echo". Default: the server default.'),
  system_prompt: z.string().max(1_000_000).optional().describe('System prompt of every LLM call of the session.'),
  metadata: Metadata.optional().describe('Free-form string labels (at most 64).'),
  memory: z.boolean().optional().describe('Index compacted history into semantic memory and give the agent a memory_search tool.'),
  compaction: Compaction.optional().describe('Automatic context compaction settings.'),
  tools: z.array(ToolDefinition).max(128).optional()
    .describe('Client-executed tools: a turn that calls one pauses (status requires_action) until turn_run sends tool_results.'),
  max_total_tokens: z.int().min(1).optional().describe('Token budget of the whole session.'),
})

export const TurnInput = z.strictObject({
  session_id: SessionId,
  input: z.string().min(1).optional().describe('The user message. Send exactly one of input or tool_results.'),
  tool_results: z.array(ToolResult).min(1).optional()
    .describe("Answers to a paused turn's tool_calls (every pending call), to continue that turn."),
  max_tokens: MaxTokens,
})

export const ResumeInput = z.strictObject({
  session_id: SessionId,
  input: z.string().min(1).optional().describe('A new user message; omit to let the agent answer the last user message.'),
  max_tokens: MaxTokens,
})

export const SessionIdInput = z.strictObject({ session_id: SessionId })

export const ListInput = z.strictObject({
  limit: z.int().min(1).max(100).optional().describe('Page size (default 20).'),
  cursor: z.string().max(512).optional().describe('next_cursor of the previous page.'),
  status: z.enum(['active', 'archived']).optional().describe('Only sessions with this status.'),
})

export const MemorySearchInput = z.strictObject({
  q: z.string().min(1).max(4096).describe('What to look for (natural language).'),
  limit: z.int().min(1).max(20).optional().describe('Number of hits (default 5).'),
  session_id: SessionId.optional().describe('Restrict to this session (required with scope "session").'),
  scope: z.enum(['session', 'tenant']).optional().describe('"tenant" (default): all your sessions; "session": session_id only.'),
  metadata: MetadataFilter.optional(),
})

export const MemoryListInput = z.strictObject({
  limit: z.int().min(1).max(100).optional().describe('Page size (default 20).'),
  cursor: z.string().max(512).optional().describe('next_cursor of the previous page.'),
  session_id: SessionId.optional().describe("Only this session's entries."),
  metadata: MetadataFilter.optional(),
})

export const MemoryIdInput = z.strictObject({ id: z.guid().describe('Memory entry id (from memory_search, memory_list or the add result).') })

export const EmptyInput = z.strictObject({})

/** The first zod issue as `INVALID_REQUEST`, naming the field like the REST surface does (`arguments/<path>`). */
export function invalidArguments(error: z.ZodError, args: unknown): BurrowError {
  const issue = error.issues[0]
  if (!issue) return new BurrowError('INVALID_REQUEST', 'arguments are invalid', { field: 'arguments' })
  let path = issue.path.map(String)
  let problem = `is invalid: ${issue.message}`
  if (issue.code === 'unrecognized_keys') {
    path = [...path, String(issue.keys[0])]
    problem = 'is not an allowed property'
  } else if (issue.code === 'invalid_type' && valueAt(args, issue.path) === undefined) {
    problem = 'is required'
  }
  const field = ['arguments', ...path].join('/')
  return new BurrowError('INVALID_REQUEST', `${field} ${problem}`, { field })
}

function valueAt(value: unknown, path: readonly PropertyKey[]): unknown {
  let v = value
  for (const k of path) {
    if (v === null || typeof v !== 'object') return undefined
    v = (v as Record<PropertyKey, unknown>)[k]
  }
  return v
}

const jsonSchemas = new WeakMap<z.ZodType, Record<string, unknown>>()

/** A tool's input schema as JSON Schema (what `tools/list` advertises), for the depth check of arguments. */
export function jsonSchemaOf(schema: z.ZodType): Record<string, unknown> {
  let json = jsonSchemas.get(schema)
  if (!json) jsonSchemas.set(schema, json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>)
  return json
}
