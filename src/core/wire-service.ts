/** Wire shapes of the service itself (docs/api.md): its capabilities, and the problem document every error is. */
import { Type, type Static } from 'typebox'

const Str = (o: Record<string, unknown> = {}) => Type.String(o)

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
  type: Str(),
  title: Str(),
  status: Type.Integer(),
  detail: Str(),
  code: Str(),
  request_id: Str(),
  field: Type.Optional(Str()),
  data: Type.Optional(Type.Record(Str(), Type.Unknown())),
})
export type Problem = Static<typeof ProblemSchema>
