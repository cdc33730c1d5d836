/**
 * Wire shapes of the API (docs/api.md; snake_case JSON), as TypeBox schemas so that every
 * surface validates against — and the OpenAPI document is generated from — one
 * definition. TypeScript types are derived from them, never written twice.
 */
import { Type, type Static, type TSchema } from 'typebox'
import {
  ImageBlockSchema,
  MessageSchema,
  TextBlockSchema,
  ToolCallSchema,
  ToolDefinitionSchema,
  ToolResultInputSchema,
} from './messages.js'
import { ModelSettingsPatchSchema, ModelSettingsSchema, OnBusySchema } from './wire-settings.js'

export * from './wire-events.js'
export * from './wire-tokens.js'
export * from './wire-settings.js'
export * from './wire-service.js'

const Str = (o: Record<string, unknown> = {}) => Type.String(o)
const Int = (o: Record<string, unknown> = {}) => Type.Integer(o)
const Strict = { additionalProperties: false } as const

// ---- ids ---------------------------------------------------------------------------

/** A session id where a request names one in its parameters (JSON-RPC params, MCP tool arguments). */
export const SessionIdSchema = Str({ format: 'uuid', description: 'Session id (UUIDv7), as session creation returned it.' })
/** A memory entry id where a request names one in its parameters. */
export const MemoryIdSchema = Str({ format: 'uuid', description: 'Memory entry id (from a search, a listing or the add result).' })

// ---- configuration pieces ----------------------------------------------------------

export const CompactionConfigSchema = Type.Object(
  {
    auto_compact_threshold: Type.Optional(Int({ minimum: 1, description: 'Compact when the history reaches this many tokens.' })),
    recent_turn_budget: Type.Optional(Int({ minimum: 0, description: 'Complete recent turns kept verbatim after compaction.' })),
    max_summary_tokens: Type.Optional(Int({ minimum: 1, maximum: 200_000, description: 'Token limit of the compaction summary.' })),
    min_turns_between_compactions: Type.Optional(Int({ minimum: 0, description: 'Loop guard: turns that must pass between compactions.' })),
    max_history_messages: Type.Optional(Int({ minimum: 2, description: 'Also compact when the history has more messages than this.' })),
  },
  Strict,
)

// A record's JSON Schema keeps no constraint of its key type (any key matches `^.*$`): `propertyNames` states it.
export const MetadataSchema = Type.Record(Str({ maxLength: 128 }), Str({ maxLength: 4096 }), {
  maxProperties: 64,
  propertyNames: { maxLength: 128 },
})

/** A metadata filter: entries whose metadata has every KEY=VALUE pair (REST: `metadata.KEY=VALUE` query parameters). */
export const METADATA_FILTER_KEY = '^[A-Za-z0-9_.:-]{1,64}$'
export const METADATA_FILTER_VALUE_MAX = 256
export const MetadataFilterSchema = Type.Record(Str({ pattern: METADATA_FILTER_KEY }), Str({ maxLength: METADATA_FILTER_VALUE_MAX }), {
  additionalProperties: false,
  maxProperties: 16,
  description: 'Only entries whose metadata has every one of these KEY=VALUE pairs.',
})
// ---- requests ----------------------------------------------------------------------

export const CreateSessionSchema = Type.Object(
  {
    model: Type.Optional(
      Str({
        pattern: '^[a-zA-Z0-9_.-]+:.+$',
        maxLength: 256,
        description:
          '"provider:model", e.g. "anthropic:claude-sonnet-4-5", "openai:gpt-4o-mini" or "offline:echo". Default: the server default.',
      }),
    ),
    system_prompt: Type.Optional(Str({ maxLength: 1_000_000, description: 'System prompt of every LLM call of the session.' })),
    metadata: Type.Optional(Type.With(MetadataSchema, { description: 'Free-form string labels (at most 64).' })),
    memory: Type.Optional(
      Type.Boolean({ description: 'Index compacted history into semantic memory and give the agent a memory_search tool.' }),
    ),
    compaction: Type.Optional(Type.With(CompactionConfigSchema, { description: 'Automatic context compaction settings.' })),
    tools: Type.Optional(
      Type.Array(ToolDefinitionSchema, {
        maxItems: 128,
        description: 'Client-executed tools: a turn that calls one pauses (status requires_action) until the client sends tool_results.',
      }),
    ),
    max_total_tokens: Type.Optional(Int({ minimum: 1, description: 'Token budget of the whole session.' })),
    model_settings: Type.Optional(Type.With(ModelSettingsSchema, { description: "Defaults of every turn's model settings." })),
  },
  Strict,
)
export type CreateSession = Static<typeof CreateSessionSchema>

/** `PATCH /v1/sessions/{id}`: what changes; effective from the next turn. */
export const UpdateSessionSchema = Type.Object(
  {
    metadata: Type.Optional(
      Type.Record(Str({ maxLength: 128 }), Type.Union([Str({ maxLength: 4096 }), Type.Null()]), {
        maxProperties: 64,
        propertyNames: { maxLength: 128 },
        description: 'Merged into the metadata (JSON merge patch): a key with a string is set, a key with null removed.',
      }),
    ),
    system_prompt: CreateSessionSchema.properties.system_prompt,
    tools: Type.Optional(
      Type.Array(ToolDefinitionSchema, { maxItems: 128, description: 'The client-executed tools, replacing the current list.' }),
    ),
    compaction: Type.Optional(
      Type.With(CompactionConfigSchema, { description: 'Compaction settings: the fields given replace the current ones.' }),
    ),
    model_settings: Type.Optional(ModelSettingsPatchSchema),
  },
  { ...Strict, minProperties: 1 },
)
export type UpdateSession = Static<typeof UpdateSessionSchema>

/** `POST /v1/sessions/{id}/fork`: where to fork (default: the last event). */
export const ForkSessionSchema = Type.Object(
  {
    at_seq: Type.Optional(
      Int({ minimum: 1, description: "Fork after this event: the fork's history is the source's up to it. Default: the last event." }),
    ),
  },
  Strict,
)
export type ForkSession = Static<typeof ForkSessionSchema>

export const StartTurnSchema = Type.Object(
  {
    input: Type.Optional(
      Type.Union([Str({ minLength: 1 }), Type.Array(Type.Union([TextBlockSchema, ImageBlockSchema]), { minItems: 1 })], {
        description: 'The user message: a string, or text and image blocks. Send exactly one of input or tool_results.',
      }),
    ),
    tool_results: Type.Optional(
      Type.Array(ToolResultInputSchema, {
        minItems: 1,
        description: "Answers to a paused turn's tool_calls (every pending call), to continue that turn.",
      }),
    ),
    ...ModelSettingsSchema.properties,
    on_busy: Type.Optional(OnBusySchema),
  },
  Strict,
)
export type StartTurn = Static<typeof StartTurnSchema>
/** Resume takes the same body as a turn: it continues a persisted session. */
export type ResumeTurn = StartTurn

export const SessionStatusSchema = Type.Union([Type.Literal('active'), Type.Literal('archived')])
export type SessionStatus = Static<typeof SessionStatusSchema>

const Instant = (description: string) => Type.Optional(Str({ format: 'date-time', maxLength: 64, description }))
/** The session list's own parameters (REST adds `metadata.KEY=VALUE` query parameters; the other surfaces `metadata`). */
export const sessionQueryParams = {
  limit: Type.Optional(Int({ minimum: 1, maximum: 100, default: 20, description: 'Page size.' })),
  cursor: Type.Optional(Str({ maxLength: 512, description: '`next_cursor` of the previous page.' })),
  status: Type.Optional(Type.With(SessionStatusSchema, { description: 'Only sessions with this status.' })),
  created_after: Instant('Only sessions created at or after this instant (RFC 3339).'),
  created_before: Instant('Only sessions created before this instant.'),
  updated_after: Instant('Only sessions with activity (their last event) at or after this instant.'),
  updated_before: Instant('Only sessions whose last activity was before this instant.'),
}
export const SessionQuerySchema = Type.Object(
  {
    ...sessionQueryParams,
    metadata: Type.Optional(
      Type.With(MetadataFilterSchema, { description: 'Only sessions whose metadata has every one of these KEY=VALUE pairs.' }),
    ),
  },
  Strict,
)
export type SessionQuery = Static<typeof SessionQuerySchema>

// Requests that name their session or entry in their parameters (JSON-RPC, MCP) rather than in a path.

export const SessionRefSchema = Type.Object({ session_id: SessionIdSchema }, Strict)
/** A turn's request with the session it runs on: the REST body plus the path's id. */
export const SessionTurnSchema = Type.Object({ session_id: SessionIdSchema, ...StartTurnSchema.properties }, Strict)
export const MemoryRefSchema = Type.Object({ id: MemoryIdSchema }, Strict)
/** A fork's request with the session it forks. */
export const SessionForkSchema = Type.Object({ session_id: SessionIdSchema, ...ForkSessionSchema.properties }, Strict)
/** A session's changes with the session they apply to: the PATCH body plus the path's id. */
export const SessionUpdateSchema = Type.Object(
  { session_id: SessionIdSchema, ...UpdateSessionSchema.properties },
  { ...Strict, minProperties: 2 },
)
export const NoParamsSchema = Type.Object({}, Strict)

// ---- responses ---------------------------------------------------------------------

export const UsageSchema = Type.Object({ input_tokens: Int(), output_tokens: Int() })
export const TurnUsageSchema = Type.Object({ input_tokens: Int(), output_tokens: Int(), compaction_tokens: Int() })

export const EffectiveCompactionSchema = Type.Object({
  auto_compact_threshold: Int(),
  recent_turn_budget: Int(),
  max_summary_tokens: Int(),
  min_turns_between_compactions: Int(),
  max_history_messages: Type.Union([Int(), Type.Null()]),
})

export const SessionCreatedSchema = Type.Object({
  session_id: Str({ format: 'uuid' }),
  status: SessionStatusSchema,
  created_at: Str({ format: 'date-time' }),
  model: Str(),
  system_prompt: Str(),
  metadata: Type.Record(Str(), Str()),
  memory: Type.Boolean(),
  compaction: Type.Union([EffectiveCompactionSchema, Type.Null()]),
  tools: Type.Array(ToolDefinitionSchema),
  max_total_tokens: Type.Union([Int(), Type.Null()]),
  model_settings: ModelSettingsSchema,
})
export type SessionCreated = Static<typeof SessionCreatedSchema>

export const TurnStatusSchema = Type.Union([Type.Literal('completed'), Type.Literal('requires_action')])

export const TurnResultSchema = Type.Object({
  session_id: Str({ format: 'uuid' }),
  turn: Int({ minimum: 1 }),
  status: TurnStatusSchema,
  output_text: Str(),
  messages: Type.Array(MessageSchema),
  tool_calls: Type.Array(ToolCallSchema),
  usage: TurnUsageSchema,
  stop_reason: Str(),
  /** The final answer parsed, when the turn asked for response_format json_schema and the answer matched it. */
  output_json: Type.Optional(Type.Unknown({ description: 'The final answer parsed (response_format json_schema only).' })),
  first_seq: Int({ minimum: 1 }),
  last_seq: Int({ minimum: 1 }),
})
export type TurnResult = Static<typeof TurnResultSchema>

export const ToolStatsSchema = Type.Record(Str(), Type.Object({ calls: Int(), failures: Int() }))

export const SessionUsageSchema = Type.Object({
  input_tokens: Int(),
  output_tokens: Int(),
  compaction_tokens: Int(),
  by_turn: Type.Array(Type.Object({ turn: Int(), input_tokens: Int(), output_tokens: Int(), compaction_tokens: Int() })),
})

export const NoteKeySchema = Str({ pattern: '^[A-Za-z0-9_.:-]{1,128}$', description: 'Note key: letters, digits, _ . : - (1–128).' })
export const NoteSchema = Type.Object({ key: Str(), value: Str(), updated_at: Str({ format: 'date-time' }) })
export const NotePutSchema = Type.Object({ value: Str({ maxLength: 2000 }) }, Strict)
export const NotesSchema = Type.Object({ notes: Type.Array(NoteSchema) })

export const ForkOriginSchema = Type.Union([Type.Object({ session_id: Str({ format: 'uuid' }), seq: Int({ minimum: 1 }) }), Type.Null()], {
  description: 'A fork: the session and the seq it was forked from (null: not a fork).',
})

export const SessionViewSchema = Type.Object({
  session_id: Str({ format: 'uuid' }),
  status: SessionStatusSchema,
  created_at: Str({ format: 'date-time' }),
  updated_at: Str({ format: 'date-time' }),
  model: Str(),
  system_prompt: Str(),
  metadata: Type.Record(Str(), Str()),
  messages: Type.Array(MessageSchema),
  turn_count: Int(),
  usage: SessionUsageSchema,
  tool_stats: ToolStatsSchema,
  compaction: Type.Union([
    Type.Object({
      config: EffectiveCompactionSchema,
      session_boundary_index: Int(),
      last_compaction_boundary_index: Type.Union([Int(), Type.Null()]),
      compactions: Int(),
    }),
    Type.Null(),
  ]),
  memory: Type.Boolean(),
  tools: Type.Array(ToolDefinitionSchema),
  max_total_tokens: Type.Union([Int(), Type.Null()]),
  model_settings: ModelSettingsSchema,
  pending_tool_calls: Type.Array(ToolCallSchema),
  running: Type.Boolean(),
  notes: Type.Array(NoteSchema),
  last_seq: Int(),
  forked_from: ForkOriginSchema,
})
export type SessionView = Static<typeof SessionViewSchema>

export const SessionSummarySchema = Type.Object({
  session_id: Str({ format: 'uuid' }),
  status: SessionStatusSchema,
  created_at: Str({ format: 'date-time' }),
  updated_at: Str({ format: 'date-time' }),
  model: Str(),
  metadata: Type.Record(Str(), Str()),
  turn_count: Int(),
  last_seq: Int(),
  forked_from: ForkOriginSchema,
})
export type SessionSummary = Static<typeof SessionSummarySchema>

export const pageSchema = <T extends TSchema>(item: T) =>
  Type.Object({ items: Type.Array(item), next_cursor: Type.Union([Str(), Type.Null()]) })
export const SessionPageSchema = pageSchema(SessionSummarySchema)
export interface Page<T> {
  items: T[]
  next_cursor: string | null
}

export const InterruptResultSchema = Type.Object({
  session_id: Str({ format: 'uuid' }),
  interrupted: Type.Boolean(),
  turn: Type.Union([Int(), Type.Null()]),
})
export type InterruptResult = Static<typeof InterruptResultSchema>

export const ArchiveResultSchema = Type.Object({ session_id: Str({ format: 'uuid' }), status: SessionStatusSchema })

export const CompactionResultSchema = Type.Object({
  session_id: Str({ format: 'uuid' }),
  compacted: Type.Boolean(),
  messages_before: Int(),
  messages_after: Int(),
  summary_tokens: Int(),
  /** Why nothing was compacted (e.g. every turn is within the recent-turn budget). */
  reason: Type.Optional(Str()),
})
export type CompactionOutcome = Static<typeof CompactionResultSchema>

export const MemoryHitSchema = Type.Object({
  id: Str({ description: 'The entry id (as `POST /v1/memory` returned it).' }),
  content: Str(),
  score: Type.Number({ minimum: 0, maximum: 1 }),
  session_id: Type.Union([Str(), Type.Null()]),
  turn: Type.Union([Int(), Type.Null()]),
  seq: Type.Union([Int(), Type.Null()]),
  metadata: Type.Record(Str(), Str()),
})
export const memorySearchParams = {
  q: Str({ minLength: 1, maxLength: 4096, description: 'What to look for (natural language).' }),
  limit: Type.Optional(Int({ minimum: 1, maximum: 20, default: 5, description: 'Number of hits.' })),
  session_id: Type.Optional(Str({ format: 'uuid', description: 'Restrict to this session (required with scope "session").' })),
  scope: Type.Optional(
    Type.Union([Type.Literal('session'), Type.Literal('tenant')], {
      description: '"tenant" (default): all your sessions; "session": session_id only.',
    }),
  ),
}
export const MemorySearchQuerySchema = Type.Object({ ...memorySearchParams, metadata: Type.Optional(MetadataFilterSchema) }, Strict)
export type MemorySearchQuery = Static<typeof MemorySearchQuerySchema>
export const MemorySearchResultSchema = Type.Object({ results: Type.Array(MemoryHitSchema) })
export type MemorySearchResult = Static<typeof MemorySearchResultSchema>
export const MemoryAddSchema = Type.Array(
  Type.Object(
    {
      content: Str({ minLength: 1, maxLength: 100_000 }),
      session_id: Type.Optional(Str({ format: 'uuid' })),
      metadata: Type.Optional(MetadataSchema),
    },
    Strict,
  ),
  { minItems: 1, maxItems: 1000 },
)
export type MemoryAdd = Static<typeof MemoryAddSchema>
export const MemoryAddedSchema = Type.Object({ ids: Type.Array(Str()) })
export type MemoryAdded = Static<typeof MemoryAddedSchema>
export const MemoryItemSchema = Type.Object({
  id: Str(),
  content: Str(),
  session_id: Type.Union([Str(), Type.Null()]),
  turn: Type.Union([Int(), Type.Null()]),
  seq: Type.Union([Int(), Type.Null()]),
  created_at: Str({ format: 'date-time' }),
  metadata: Type.Record(Str(), Str()),
})
export type MemoryItem = Static<typeof MemoryItemSchema>
export const MemoryItemPageSchema = pageSchema(MemoryItemSchema)
export const memoryPageParams = {
  limit: Type.Optional(Int({ minimum: 1, maximum: 100, default: 20, description: 'Page size.' })),
  cursor: Type.Optional(Str({ maxLength: 512, description: '`next_cursor` of the previous page.' })),
  session_id: Type.Optional(Str({ format: 'uuid', description: "Only this session's entries." })),
}
export const MemoryPageQuerySchema = Type.Object({ ...memoryPageParams, metadata: Type.Optional(MetadataFilterSchema) }, Strict)
export type MemoryPageQuery = Static<typeof MemoryPageQuerySchema>
