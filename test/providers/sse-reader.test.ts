// readSse, the providers' one SSE reader: framing however the bytes are cut, line endings,
// multi-line data, comments, split UTF-8, and a cut-off last event never surfacing.
import { Readable } from 'node:stream'
import t from 'tap'
import { readSse } from '../../src/providers/sse-reader.js'

async function read(
  chunks: Array<string | Uint8Array>,
): Promise<Array<{ event?: string | undefined; data: string; id?: string | undefined }>> {
  const out = []
  const bytes = chunks.map((c) => (typeof c === 'string' ? new TextEncoder().encode(c) : c))
  for await (const ev of readSse(Readable.from(bytes))) out.push({ event: ev.event, data: ev.data, id: ev.id })
  return out
}

const STREAM = [
  ': a comment the server sends as a heartbeat\n\n',
  'event: message_start\ndata: {"type":"message_start"}\n\n',
  'id: 7\nevent: content_block_delta\ndata: {"text":"héllo 🦡"}\n\n',
  'data: first line\ndata: second line\n\n',
  'data: [DONE]\n\n',
].join('')

const EXPECTED = [
  { event: 'message_start', data: '{"type":"message_start"}', id: undefined },
  { event: 'content_block_delta', data: '{"text":"héllo 🦡"}', id: '7' },
  { event: undefined, data: 'first line\nsecond line', id: undefined },
  { event: undefined, data: '[DONE]', id: undefined },
]

t.test('events in order, from one chunk', async (t) => {
  t.same(await read([STREAM]), EXPECTED)
})

t.test('the same events however the bytes are cut, UTF-8 characters split included', async (t) => {
  const bytes = new TextEncoder().encode(STREAM)
  for (const size of [1, 2, 3, 5, 7, 13]) {
    const chunks: Uint8Array[] = []
    for (let i = 0; i < bytes.length; i += size) chunks.push(bytes.subarray(i, i + size))
    t.same(await read(chunks), EXPECTED, `chunks of ${size} bytes`)
  }
})

t.test('CRLF and lone-CR line endings', async (t) => {
  t.same(await read([STREAM.replaceAll('\n', '\r\n')]), EXPECTED, 'CRLF')
  t.same(await read([STREAM.replaceAll('\n', '\r')]), EXPECTED, 'CR')
})

t.test('an unterminated last event is dropped: a cut-off stream must not look complete', async (t) => {
  t.same(await read(['data: whole\n\n', 'data: cut off mid-ev']), [{ event: undefined, data: 'whole', id: undefined }])
  t.same(await read(['data: no blank line after it\n']), [], 'a field line without the blank line is not an event')
  t.same(await read(['data: whole\r\r', 'data: cut\r']), [{ event: undefined, data: 'whole', id: undefined }], 'nor with CR endings')
})
