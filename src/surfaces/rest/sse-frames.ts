import type { EventEnvelope } from '../../core/events.js'
import type { StreamFrame } from '../../core/session-service.js'

const formatted = new WeakMap<object, string>()

/**
 * The SSE text of a frame, formatted once however many subscribers receive it.
 * `id:` is the seq of stored events (so Last-Event-ID resumes exactly) — on the tenant stream,
 * the frame's journal position (null: none, past a journal row's span); text deltas and control frames carry no id. JSON has no raw newlines, so `data:` is one line.
 */
export function frameText(f: StreamFrame): string {
  if (f.kind === 'event')
    return f.id === undefined
      ? eventText(f.event)
      : `${f.id === null ? '' : `id: ${f.id}\n`}event: ${f.event.type}\ndata: ${JSON.stringify(f.event)}\n\n`
  let s = formatted.get(f.control)
  if (s === undefined) {
    s = `event: ${f.control.type}\ndata: ${JSON.stringify(f.control)}\n\n`
    formatted.set(f.control, s)
  }
  return s
}

export function eventText(e: EventEnvelope): string {
  let s = formatted.get(e)
  if (s === undefined) {
    s =
      e.type === 'text_delta'
        ? `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`
        : `id: ${e.seq}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`
    formatted.set(e, s)
  }
  return s
}

/** The route-level serializer @fastify/sse uses for anything sent through it. */
export function passThrough(d: unknown): string {
  return typeof d === 'string' ? d : JSON.stringify(d)
}
