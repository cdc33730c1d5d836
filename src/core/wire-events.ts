// Wire shapes of stored events, event pages and stream frames: see wire.ts, which re-exports them.
import { Type } from 'typebox'

const Str = (o: Record<string, unknown> = {}) => Type.String(o)
const Int = (o: Record<string, unknown> = {}) => Type.Integer(o)

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

/**
 * Stream-only frames (no `id:`): a replay that cannot start where asked, the server ending the
 * stream, or (a turn's own stream) the turn waiting for the session.
 */
export const StreamControlSchema = Type.Object({
  type: Type.Union([Type.Literal('stream_truncated'), Type.Literal('stream_closed'), Type.Literal('turn_queued')]),
  session_id: Type.Union([Str({ format: 'uuid' }), Type.Null()]),
  data: Type.Record(Str(), Type.Unknown()),
})

export const StreamFrameSchema = Type.Union([EventEnvelopeSchema, StreamControlSchema])
