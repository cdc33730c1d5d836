import type { EventEnvelope } from '../../core/events.js'
import type { StreamFrame } from '../../core/session-service.js'

export interface SseMessage { id?: string; event: string; data: string }

const serialized = new WeakMap<object, string>()

/** JSON of an envelope, computed once however many subscribers receive it. */
function json(e: object): string {
  let s = serialized.get(e)
  if (s === undefined) { s = JSON.stringify(e); serialized.set(e, s) }
  return s
}

/**
 * One SSE message per frame: `id:` is the seq of stored events (so Last-Event-ID
 * resumes exactly); text deltas and control frames carry no id.
 */
export function sseMessage(f: StreamFrame): SseMessage {
  if (f.kind === 'event') return eventMessage(f.event)
  return { event: f.control.type, data: json(f.control) }
}

export function eventMessage(e: EventEnvelope): SseMessage {
  if (e.type === 'text_delta') return { event: e.type, data: json(e) }
  return { id: String(e.seq), event: e.type, data: json(e) }
}

/** The route-level serializer: data is already JSON. */
export function passThrough(d: unknown): string {
  return typeof d === 'string' ? d : JSON.stringify(d)
}
