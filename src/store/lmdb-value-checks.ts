import { isUtf8 } from 'node:buffer'
import type { ValueChecks } from './lmdb-page-walk.js'

// What the start-up walk (lmdb-page-walk.ts) checks of the values of Burrow's LMDB stores. LMDB keeps
// no checksum of a value, but most of Burrow's values are JSON text (lmdb-js's `json` encoding:
// JSON.stringify's output, UTF-8, no whitespace), and random bytes over JSON text almost never leave
// UTF-8 without a control byte: such a value is found at start-up instead of when it is read.

/** JSON.stringify's output starts with one of these: { [ " - 0…9 t f n. */
const STARTS = new Set([...'{["-0123456789tfn'].map((c) => c.charCodeAt(0)))

/** What keeps `value` from being JSON text as lmdb-js writes it, or null. */
export function jsonText(value: Buffer): string | null {
  if (value.length === 0 || !STARTS.has(value[0]!)) return 'is not JSON text'
  if (!isUtf8(value)) return 'is not JSON text (not UTF-8)'
  const at = controlByte(value)
  return at < 0 ? null : `is not JSON text (byte ${value[at]} at ${at})`
}

/**
 * The first byte below 0x20 (JSON.stringify escapes them all), or -1. Four bytes at a time: a word
 * holds such a byte exactly when (x - 0x20202020) & ~x & 0x80808080 is not 0 (a byte below n, for
 * n <= 128: "Bit Twiddling Hacks", hasless), about twice as fast as a byte loop on a whole store.
 */
export function controlByte(v: Buffer): number {
  let i = 0
  const head = Math.min((4 - (v.byteOffset & 3)) & 3, v.length)
  for (; i < head; i++) if (v[i]! < 0x20) return i
  const n = (v.length - i) >>> 2
  if (n > 0) {
    const words = new Uint32Array(v.buffer, v.byteOffset + i, n)
    for (let w = 0; w < n; w++) {
      const x = words[w]!
      if (((x - 0x20202020) & ~x & 0x80808080) !== 0) for (let j = i + 4 * w; j < i + 4 * w + 4; j++) if (v[j]! < 0x20) return j
    }
  }
  for (i += 4 * n; i < v.length; i++) if (v[i]! < 0x20) return i
  return -1
}

/**
 * The session store (store/lmdb-env.ts): every database but `meta` holds JSON since schema 3; a
 * schema 2 directory (msgpack, upgraded when it is opened) is walked without value checks. The
 * schema version is read from `meta`, walked first.
 */
export function sessionStoreValues(): ValueChecks {
  let version: number | undefined
  return {
    first: 'meta',
    saw(_db, key, value) {
      // meta's values are msgpack (lmdb-js's default): a schema version is one positive fixint byte.
      if (key.toString('latin1') === 'schema_version' && value.length === 1 && value[0]! < 0x80) version = value[0]
    },
    of: (db) => (db === 'meta' || version === 2 ? undefined : jsonText),
  }
}

/**
 * The memory store (memory/memory-db.ts): its outcomes of memory adds are JSON. Its entries and
 * postings are msgpack and binary, and not checked here (msgpack has no redundancy to check).
 */
export function memoryStoreValues(): ValueChecks {
  return { of: (db) => (db === 'idempotency' ? jsonText : undefined) }
}
