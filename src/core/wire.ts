/**
 * Wire shapes of the contract (snake_case JSON), as TypeBox schemas so that every
 * surface validates against — and the OpenAPI document is generated from — one
 * definition. TypeScript types are derived from them, never written twice.
 */
import { Type, type Static, type TSchema } from 'typebox'
import { ImageBlockSchema, MessageSchema, TextBlockSchema, ToolCallSchema, ToolDefinitionSchema, ToolResultInputSchema } from './messages.js'

const Str = (o: Record<string, unknown> = {}) => Type.String(o)
const Int = (o: Record<string, unknown> = {}) => Type.Integer(o)
const Strict = { additionalProperties: false } as const

// ---- configuration pieces ----------------------------------------------------------

export const CompactionConfigSchema = Type.Object({
  auto_compact_threshold: Type.Optional(Int({ minimum: 1 })),
  recent_turn_budget: Type.Optional(Int({ minimum: 0 })),
  max_summary_tokens: Type.Optional(Int({ minimum: 1, maximum: 200_000 })),
  min_turns_between_compactions: Type.Optional(Int({ minimum: 0 })),
  max_history_messages: Type.Optional(Int({ minimum: 2 })),
}, Strict)

export const MetadataSchema = Type.Record(Str({ maxLength: 128 }), Str({ maxLength: 4096 }), { maxProperties: 64 })

// ---- requests ----------------------------------------------------------------------

export const CreateSessionSchema = Type.Object({
  model: Type.Optional(Str({ pattern: '^[a-zA-Z0-9_.-]+:.+$', maxLength: 256 })),
  system_prompt: Type.Optional(Str({ maxLength: 1_000_000 })),
  metadata: Type.Optional(MetadataSchema),
  memory: Type.Optional(Type.Boolean()),
  compaction: Type.Optional(CompactionConfigSchema),
  tools: Type.Optional(Type.Array(ToolDefinitionSchema, { maxItems: 128 })),
  max_total_tokens: Type.Optional(Int({ minimum: 1 })),
}, Strict)
export type CreateSession = Static<typeof CreateSessionSchema>

export const StartTurnSchema = Type.Object({
  input: Type.Optional(Type.Union([
    Str({ minLength: 1 }),
    Type.Array(Type.Union([TextBlockSchema, ImageBlockSchema]), { minItems: 1 }),
  ])),
  tool_results: Type.Optional(Type.Array(ToolResultInputSchema, { minItems: 1 })),
  max_tokens: Type.Optional(Int({ minimum: 1, maximum: 200_000 })),
}, Strict)
export type StartTurn = Static<typeof StartTurnSchema>
/** Resume takes the same body as a turn: it continues a persisted session. */
export type ResumeTurn = StartTurn

export const SessionStatusSchema = Type.Union([Type.Literal('active'), Type.Literal('archived')])
export type SessionStatus = Static<typeof SessionStatusSchema>

export const SessionQuerySchema = Type.Object({
  limit: Type.Optional(Int({ minimum: 1, maximum: 100, default: 20 })),
  cursor: Type.Optional(Str({ maxLength: 512 })),
  status: Type.Optional(SessionStatusSchema),
}, Strict)
export type SessionQuery = Static<typeof SessionQuerySchema>

// ---- responses ---------------------------------------------------------------------

export const UsageSchema = Type.Object({ input_tokens: Int(), output_tokens: Int() })
export const TurnUsageSchema = Type.Object({ input_tokens: Int(), output_tokens: Int(), compaction_tokens: Int() })

export const EffectiveCompactionSchema = Type.Object({
  auto_compact_threshold: Int(), recent_turn_budget: Int(), max_summary_tokens: Int(),
  min_turns_between_compactions: Int(), max_history_messages: Type.Union([Int(), Type.Null()]),
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
  first_seq: Int({ minimum: 1 }),
  last_seq: Int({ minimum: 1 }),
})
export type TurnResult = Static<typeof TurnResultSchema>

export const ToolStatsSchema = Type.Record(Str(), Type.Object({ calls: Int(), failures: Int() }))

export const SessionUsageSchema = Type.Object({
  input_tokens: Int(), output_tokens: Int(), compaction_tokens: Int(),
  by_turn: Type.Array(Type.Object({ turn: Int(), input_tokens: Int(), output_tokens: Int(), compaction_tokens: Int() })),
})

export const NoteKeySchema = Str({ pattern: '^[A-Za-z0-9_.:-]{1,128}$', description: 'Note key: letters, digits, _ . : - (1–128).' })
export const NoteSchema = Type.Object({ key: Str(), value: Str(), updated_at: Str({ format: 'date-time' }) })
export const NotePutSchema = Type.Object({ value: Str({ maxLength: 2000 }) }, Strict)
export const NotesSchema = Type.Object({ notes: Type.Array(NoteSchema) })

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
  compaction: Type.Union([Type.Object({
    config: EffectiveCompactionSchema,
    session_boundary_index: Int(),
    last_compaction_boundary_index: Type.Union([Int(), Type.Null()]),
    compactions: Int(),
  }), Type.Null()]),
  memory: Type.Boolean(),
  tools: Type.Array(ToolDefinitionSchema),
  max_total_tokens: Type.Union([Int(), Type.Null()]),
  pending_tool_calls: Type.Array(ToolCallSchema),
  running: Type.Boolean(),
  notes: Type.Array(NoteSchema),
  last_seq: Int(),
})
export type SessionView = Static<typeof SessionViewSchema>

export const SessionSummarySchema = Type.Object({
  session_id: Str({ format: 'uuid' }), status: SessionStatusSchema,
  created_at: Str({ format: 'date-time' }), updated_at: Str({ format: 'date-time' }),
  model: Str(), metadata: Type.Record(Str(), Str()), turn_count: Int(), last_seq: Int(),
})
export type SessionSummary = Static<typeof SessionSummarySchema>

export const pageSchema = <T extends TSchema>(item: T) =>
  Type.Object({ items: Type.Array(item), next_cursor: Type.Union([Str(), Type.Null()]) })
export const SessionPageSchema = pageSchema(SessionSummarySchema)
export interface Page<T> { items: T[]; next_cursor: string | null }

export const InterruptResultSchema = Type.Object({
  session_id: Str({ format: 'uuid' }), interrupted: Type.Boolean(), turn: Type.Union([Int(), Type.Null()]),
})
export type InterruptResult = Static<typeof InterruptResultSchema>

export const ArchiveResultSchema = Type.Object({ session_id: Str({ format: 'uuid' }), status: SessionStatusSchema })

export const CompactionResultSchema = Type.Object({
  session_id: Str({ format: 'uuid' }), compacted: Type.Boolean(),
  messages_before: Int(), messages_after: Int(), summary_tokens: Int(),
  /** Why nothing was compacted (e.g. every turn is within the recent-turn budget). */
  reason: Type.Optional(Str()),
})
export type CompactionOutcome = Static<typeof CompactionResultSchema>

export const ProviderStatusSchema = Type.Object({ name: Str(), configured: Type.Boolean(), offline: Type.Boolean(), default_model: Str() })

export const CapabilitiesSchema = Type.Object({
  session_store: Type.Boolean(),
  memory_store: Type.Boolean(),
  session_compaction: Type.Boolean(),
  version: Str(),
  auth: Type.Boolean(),
  default_model: Str(),
  providers: Type.Array(ProviderStatusSchema),
})
export type Capabilities = Static<typeof CapabilitiesSchema>

export const ProblemSchema = Type.Object({
  type: Str(), title: Str(), status: Int(), detail: Str(), code: Str(), request_id: Str(),
  field: Type.Optional(Str()),
  data: Type.Optional(Type.Record(Str(), Type.Unknown())),
})
export type Problem = Static<typeof ProblemSchema>

export const EventEnvelopeSchema = Type.Object({
  seq: Int({ minimum: 0 }),
  session_id: Str({ format: 'uuid' }),
  turn: Int({ minimum: 0 }),
  type: Str(),
  at: Str({ format: 'date-time' }),
  data: Type.Record(Str(), Type.Unknown()),
})

export const EventPageQuerySchema = Type.Object({
  after: Type.Optional(Int({ minimum: 0, default: 0 })),
  limit: Type.Optional(Int({ minimum: 1, maximum: 1000, default: 100 })),
})
export const EventPageSchema = Type.Object({
  events: Type.Array(EventEnvelopeSchema),
  truncated: Type.Boolean({ description: 'Events after `after` exist but are no longer available (ephemeral buffer).' }),
  last_seq: Int({ description: "The session's last stored seq: read on from the last event's seq while it is below." }),
})

/** Stream-only frames (no `id:`): a replay that cannot start where asked, or the server ending the stream. */
export const StreamControlSchema = Type.Object({
  type: Type.Union([Type.Literal('stream_truncated'), Type.Literal('stream_closed')]),
  session_id: Type.Union([Str({ format: 'uuid' }), Type.Null()]),
  data: Type.Record(Str(), Type.Unknown()),
})

export const StreamFrameSchema = Type.Union([EventEnvelopeSchema, StreamControlSchema])

/** A metadata filter: entries whose metadata has every KEY=VALUE pair (REST: `metadata.KEY=VALUE` query parameters). */
export const METADATA_FILTER_KEY = '^[A-Za-z0-9_.:-]{1,64}$'
export const METADATA_FILTER_VALUE_MAX = 256
export const MetadataFilterSchema = Type.Record(Str({ pattern: METADATA_FILTER_KEY }), Str({ maxLength: METADATA_FILTER_VALUE_MAX }), {
  additionalProperties: false, maxProperties: 16, description: 'Only entries whose metadata has every one of these KEY=VALUE pairs.',
})
export const MemoryHitSchema = Type.Object({
  id: Str({ description: 'The entry id (as `POST /v1/memory` returned it).' }),
  content: Str(), score: Type.Number({ minimum: 0, maximum: 1 }), session_id: Type.Union([Str(), Type.Null()]),
  turn: Type.Union([Int(), Type.Null()]), seq: Type.Union([Int(), Type.Null()]), metadata: Type.Record(Str(), Str()),
})
export const memorySearchParams = {
  q: Str({ minLength: 1, maxLength: 4096 }),
  limit: Type.Optional(Int({ minimum: 1, maximum: 20, default: 5 })),
  session_id: Type.Optional(Str({ format: 'uuid' })),
  scope: Type.Optional(Type.Union([Type.Literal('session'), Type.Literal('tenant')])),
}
export const MemorySearchQuerySchema = Type.Object({ ...memorySearchParams, metadata: Type.Optional(MetadataFilterSchema) }, Strict)
export type MemorySearchQuery = Static<typeof MemorySearchQuerySchema>
export const MemorySearchResultSchema = Type.Object({ results: Type.Array(MemoryHitSchema) })
export type MemorySearchResult = Static<typeof MemorySearchResultSchema>
export const MemoryAddSchema = Type.Array(Type.Object({
  content: Str({ minLength: 1, maxLength: 100_000 }),
  session_id: Type.Optional(Str({ format: 'uuid' })),
  metadata: Type.Optional(MetadataSchema),
}, Strict), { minItems: 1, maxItems: 1000 })
export type MemoryAdd = Static<typeof MemoryAddSchema>
export const MemoryAddedSchema = Type.Object({ ids: Type.Array(Str()) })
export type MemoryAdded = Static<typeof MemoryAddedSchema>
export const MemoryItemSchema = Type.Object({
  id: Str(), content: Str(), session_id: Type.Union([Str(), Type.Null()]), turn: Type.Union([Int(), Type.Null()]),
  seq: Type.Union([Int(), Type.Null()]), created_at: Str({ format: 'date-time' }), metadata: Type.Record(Str(), Str()),
})
export type MemoryItem = Static<typeof MemoryItemSchema>
export const MemoryItemPageSchema = pageSchema(MemoryItemSchema)
export const memoryPageParams = {
  limit: Type.Optional(Int({ minimum: 1, maximum: 100, default: 20 })),
  cursor: Type.Optional(Str({ maxLength: 512, description: '`next_cursor` of the previous page.' })),
  session_id: Type.Optional(Str({ format: 'uuid', description: "Only this session's entries." })),
}
export const MemoryPageQuerySchema = Type.Object({ ...memoryPageParams, metadata: Type.Optional(MetadataFilterSchema) }, Strict)
export type MemoryPageQuery = Static<typeof MemoryPageQuerySchema>
