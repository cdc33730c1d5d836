// The change feed's messages (pg-change-feed.ts) and how they are cut and packed into NOTIFY payloads.

/** PostgreSQL refuses a NOTIFY payload of 8000 bytes or more; this leaves room for the envelope. */
export const PAYLOAD_LIMIT = 7_900
/** A text delta's text is cut into pieces of at most this many bytes (as JSON) per notification. */
export const DELTA_PIECE = 6_000

/** A message on the feed channel: a commit (`c`), a text delta (`d`) or a deletion (`x`). Short keys: payloads are small. */
export type FeedMessage =
  | { k: 'c'; t: string; s: string; f: number; l: number }
  | { k: 'd'; t: string; s: string; n: number; q: number; a: string; x: string }
  | { k: 'x'; t: string; s: string }

/**
 * A message on the interrupt channel: a request (`i`), found (`f`: the replica runs it), done (`d`);
 * a request for a session's lease (`l`), and the holder's answer (`g`: given up, or not).
 */
export type InterruptMessage =
  | { k: 'i'; id: string; t: string; s: string }
  | { k: 'f'; id: string; n: number }
  | { k: 'd'; id: string; n: number }
  | { k: 'l'; id: string; t: string; s: string }
  | { k: 'g'; id: string; ok: boolean }

/** A delta's text in pieces whose JSON stays under DELTA_PIECE bytes. */
export function pieces(text: string): string[] {
  if (Buffer.byteLength(JSON.stringify(text)) <= DELTA_PIECE) return [text]
  const out: string[] = []
  let start = 0
  // At most 6 bytes of JSON per UTF-16 unit (\uXXXX): a piece of DELTA_PIECE / 6 units always fits.
  const step = Math.floor(DELTA_PIECE / 6)
  while (start < text.length) {
    let end = Math.min(text.length, start + step)
    // Never split a surrogate pair.
    if (end < text.length && /[\uD800-\uDBFF]/.test(text[end - 1]!)) end--
    out.push(text.slice(start, end))
    start = end
  }
  return out
}

/** Messages packed into as few payloads as the limit allows, in order. */
export function packed(instance: string, batch: FeedMessage[], number: () => number): string[] {
  const out: string[] = []
  let current: string[] = []
  let size = 0
  // Room for the payload's number (at most 16 digits) in the head.
  const head = () => `{"r":${JSON.stringify(instance)},"n":${number()},"m":[`
  const room = PAYLOAD_LIMIT - Buffer.byteLength(`{"r":${JSON.stringify(instance)},"n":0000000000000000,"m":[]}`)
  for (const m of batch) {
    const json = JSON.stringify(m)
    if (current.length > 0 && size + Buffer.byteLength(json) > room) {
      out.push(`${head()}${current.join(',')}]}`)
      current = []
      size = 0
    }
    current.push(json)
    size += Buffer.byteLength(json) + 1
  }
  if (current.length > 0) out.push(`${head()}${current.join(',')}]}`)
  return out
}
