// The start-up check of JSON values (src/store/lmdb-value-checks.ts): what lmdb-js's json encoding
// writes passes; a byte no encoder writes is found wherever it sits, against a plain byte loop.
import t from 'tap'
import fc from 'fast-check'
import { controlByte, jsonText } from '../../src/store/lmdb-value-checks.js'

const loop = (v: Buffer) => v.findIndex((b) => b < 0x20)

t.test('JSON.stringify output is JSON text', async (t) => {
  fc.assert(
    fc.property(fc.jsonValue(), (v) => jsonText(Buffer.from(JSON.stringify(v) ?? 'null')) === null),
    { numRuns: 500 },
  )
  t.pass('500 values')
})

t.test('the word-at-a-time scan finds the first control byte at any alignment', async (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 64 }), fc.integer({ min: 0, max: 7 }), (bytes, shift) => {
      const v = Buffer.alloc(bytes.length + 8).subarray(shift, shift + bytes.length)
      v.set(bytes)
      return controlByte(v) === loop(v)
    }),
    { numRuns: 5000 },
  )
  t.pass('5,000 buffers')
})

t.test('damage is found', async (t) => {
  const text = Buffer.from(JSON.stringify({ type: 'message', text: 'héllo' }))
  t.match(jsonText(Buffer.concat([text.subarray(0, 10), Buffer.from([0x07]), text.subarray(11)])), /byte 7 at 10/)
  t.match(jsonText(Buffer.concat([text.subarray(0, 10), Buffer.from([0xc3, 0x28]), text.subarray(12)])), /not UTF-8/)
  t.match(jsonText(Buffer.from([0x93, 0x01, 0x02, 0x03])), /is not JSON text/, 'msgpack is not')
  t.match(jsonText(Buffer.alloc(0)), /is not JSON text/)
})
