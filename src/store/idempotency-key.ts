import { idempotencyKeyParts } from '../core/idempotency-keys.js'

/**
 * The caller's part of an idempotency key as the stores that keep records hold it. A header value
 * is latin-1 text without control characters, but a JSON-RPC `idempotency_key` is any string, and
 * neither store takes every string as it is: a PostgreSQL text column refuses NUL and turns a lone
 * surrogate into U+FFFD (so two keys would share a row), and lmdb-js writes a key of 64 characters
 * or more as plain UTF-8, which reads back wrongly or not at all (a scan throws) when it holds
 * control characters, and also replaces lone surrogates. Such a key, and one that starts with the
 * marker, is stored as the marker followed by its JSON text (control characters and lone surrogates
 * escaped): no two keys share a stored form, and every other key is stored as it is.
 */
const ESCAPED = '~json:'
// A control character (U+0000–U+001F) or a surrogate not part of a pair.
const AWKWARD = /[\u0000-\u001f]|\p{Cs}/u

export function storedCallerKey(k: string): string {
  return AWKWARD.test(k) || k.startsWith(ESCAPED) ? ESCAPED + JSON.stringify(k) : k
}

/** `tenant \0 session \0 key` with the caller's key in its stored form (a prefix, with no key, stays as it is). */
export function storedIdempotencyKey(key: string): string {
  const a = key.indexOf('\u0000')
  const b = a < 0 ? -1 : key.indexOf('\u0000', a + 1)
  return b < 0 ? key : key.slice(0, b + 1) + storedCallerKey(key.slice(b + 1))
}

/**
 * `tenant \0 session \0 key` as a shared store's row key: the tenant, the session (`-` outside
 * one) and the caller's key in its stored form — text columns cannot hold the NUL separator.
 */
export function splitIdempotencyKey(key: string): [string, string, string] {
  const [tenant, scope, caller] = idempotencyKeyParts(key)
  return [tenant, scope, storedCallerKey(caller)]
}
