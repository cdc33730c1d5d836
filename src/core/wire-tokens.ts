// Wire shapes of access tokens (`POST /v1/tokens`): see wire.ts, which re-exports them.
import { Type, type Static } from 'typebox'

const Str = (o: Record<string, unknown> = {}) => Type.String(o)
const Int = (o: Record<string, unknown> = {}) => Type.Integer(o)

export const TokenRequestSchema = Type.Object(
  {
    scope: Type.Union([Type.Literal('read'), Type.Literal('write')], {
      description: '`read`: reads and streams only (writes are 403 FORBIDDEN); `write`: reads and writes. Never wider than the caller.',
    }),
    session_id: Type.Optional(
      Str({ format: 'uuid', description: 'Limit the token to this session (its reads, streams and, with `write`, turns).' }),
    ),
    ttl_s: Type.Optional(Int({ minimum: 1, maximum: 3600, default: 900, description: 'Lifetime in seconds (at most an hour).' })),
  },
  { additionalProperties: false },
)
export type TokenRequest = Static<typeof TokenRequestSchema>
export const AccessTokenSchema = Type.Object({
  token: Str({ description: 'Send as `Authorization: Bearer <token>`, or as `?access_token=` on SSE routes.' }),
  token_type: Type.Literal('Bearer'),
  scope: Type.Union([Type.Literal('read'), Type.Literal('write')]),
  session_id: Type.Union([Str(), Type.Null()], { description: 'The one session the token is limited to, or null.' }),
  expires_at: Str({ format: 'date-time' }),
  expires_in: Int({ description: 'Seconds until it expires.' }),
  refresh_until: Str({ format: 'date-time', description: 'Tokens this token mints (refreshes) expire by then at the latest.' }),
})
export type AccessToken = Static<typeof AccessTokenSchema>
