import { createParser, type EventSourceMessage } from 'eventsource-parser'
import type { Readable } from 'node:stream'

/** Parses a streaming HTTP body as Server-Sent Events (eventsource-parser does the framing). */
export async function* readSse(body: Readable | AsyncIterable<Uint8Array>): AsyncGenerator<EventSourceMessage> {
  const pending: EventSourceMessage[] = []
  const parser = createParser({ onEvent: (e) => { pending.push(e) } })
  const decoder = new TextDecoder()
  for await (const chunk of body as AsyncIterable<Uint8Array>) {
    parser.feed(decoder.decode(chunk, { stream: true }))
    while (pending.length > 0) yield pending.shift()!
  }
  parser.feed(decoder.decode())
  // An unterminated last event is dropped: a cut-off stream must not look complete.
  while (pending.length > 0) yield pending.shift()!
}
