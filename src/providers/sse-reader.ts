import { createParser, type EventSourceMessage } from 'eventsource-parser'
import type { Readable } from 'node:stream'

/**
 * Parses a streaming HTTP body as Server-Sent Events: the one reader both providers use.
 *
 * The framing is eventsource-parser's (already a dependency, also used by the client
 * package) rather than hand-written line splitting, because the corners are where
 * hand-written readers break: CRLF and lone-CR line endings, a BOM, comment lines,
 * multi-line `data:`, and fields or UTF-8 characters split across network chunks.
 */
export async function* readSse(body: Readable | AsyncIterable<Uint8Array>): AsyncGenerator<EventSourceMessage> {
  const pending: EventSourceMessage[] = []
  const parser = createParser({
    onEvent: (e) => {
      pending.push(e)
    },
  })
  const decoder = new TextDecoder()
  let last = ''
  for await (const chunk of body as AsyncIterable<Uint8Array>) {
    const text = decoder.decode(chunk, { stream: true })
    if (text) last = text
    parser.feed(text)
    while (pending.length > 0) yield pending.shift()!
  }
  const rest = decoder.decode()
  parser.feed(rest)
  // The parser holds back a trailing CR in case an LF follows; at the end of the body none
  // can, so the CR is a whole line ending and may finish the last event.
  if ((rest || last).endsWith('\r')) parser.feed('\n')
  // An unterminated last event is dropped: a cut-off stream must not look complete.
  while (pending.length > 0) yield pending.shift()!
}
