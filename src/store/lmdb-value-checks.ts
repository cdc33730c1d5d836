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
  for (let i = 0; i < value.length; i++) if (value[i]! < 0x20) return `is not JSON text (byte ${value[i]} at ${i})`
  return null
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
