/**
 * Keyword postings as stored in LMDB: one block per tenant per `add()` call, keyed
 * `[tenant, first label]`, holding the term frequencies of that call's entries — no row per
 * posting, and neither tenant nor term repeated per posting. A block is written once, in the
 * transaction that commits its entries, and rewritten only when some of its entries are
 * deleted (so a deleted entry's words do not stay on disk).
 *
 * Layout (all integers unsigned LEB128 varints):
 *   terms: n, then n × (byte length, UTF-8 bytes)       — the block's dictionary
 *   docs:  m, then m × (label − previous label, k, k × (term index, tf))
 * The first label delta is relative to the key's first label (so it is 0).
 */

/** One document's term frequencies. */
export type TermCounts = Iterable<readonly [string, number]>
export interface BlockDoc {
  label: number
  tf: TermCounts
}

export function encodeBlock(first: number, docs: readonly BlockDoc[]): Buffer {
  const dict = new Map<string, number>()
  const body: number[] = [docs.length]
  let prev = first
  for (const d of docs) {
    const pairs: number[] = []
    for (const [term, n] of d.tf) {
      let ix = dict.get(term)
      if (ix === undefined) {
        ix = dict.size
        dict.set(term, ix)
      }
      pairs.push(ix, n)
    }
    body.push(d.label - prev, pairs.length / 2, ...pairs)
    prev = d.label
  }
  const out = new Writer()
  out.varint(dict.size)
  for (const term of dict.keys()) out.string(term)
  for (const n of body) out.varint(n)
  return out.done()
}

/**
 * Calls `visit` for each document of the block, in label order, with its terms. The array
 * passed is reused between calls: copy it to keep it.
 */
export function decodeBlock(
  first: number,
  block: Uint8Array,
  visit: (label: number, tf: ReadonlyArray<readonly [string, number]>) => void,
): void {
  const r = new Reader(block)
  const terms: string[] = new Array(r.varint())
  for (let i = 0; i < terms.length; i++) terms[i] = r.string()
  const docs = r.varint()
  let label = first
  const pairs: Array<[string, number]> = []
  for (let d = 0; d < docs; d++) {
    label += r.varint()
    const k = r.varint()
    pairs.length = 0
    for (let j = 0; j < k; j++) {
      const term = terms[r.varint()]
      const tf = r.varint()
      if (term === undefined) throw new Error('a posting block names a term it does not hold')
      pairs.push([term, tf])
    }
    visit(label, pairs)
  }
  if (!r.atEnd()) throw new Error('a posting block has bytes after its last document')
}

/** The block without the given labels' documents, or null when none is left. */
export function withoutLabels(first: number, block: Uint8Array, drop: ReadonlySet<number>): Buffer | null {
  const kept: BlockDoc[] = []
  decodeBlock(first, block, (label, tf) => {
    if (!drop.has(label)) kept.push({ label, tf: tf.map(([t, n]) => [t, n] as const) })
  })
  return kept.length === 0 ? null : encodeBlock(first, kept)
}

class Writer {
  private buf = Buffer.allocUnsafe(256)
  private at = 0
  private room(n: number): void {
    if (this.at + n <= this.buf.length) return
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n))
    this.buf.copy(next, 0, 0, this.at)
    this.buf = next
  }

  varint(n: number): void {
    this.room(10)
    while (n >= 0x80) {
      this.buf[this.at++] = (n & 0x7f) | 0x80
      n = Math.floor(n / 128)
    }
    this.buf[this.at++] = n
  }

  string(s: string): void {
    const len = Buffer.byteLength(s)
    this.varint(len)
    this.room(len)
    this.at += this.buf.write(s, this.at)
  }

  done(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.at))
  }
}

class Reader {
  private at = 0
  constructor(private readonly buf: Uint8Array) {}
  varint(): number {
    let n = 0
    let scale = 1
    for (;;) {
      if (this.at >= this.buf.length) throw new Error('a posting block ends in the middle of a number')
      const b = this.buf[this.at++]!
      n += (b & 0x7f) * scale
      if (b < 0x80) return n
      scale *= 128
    }
  }

  string(): string {
    const len = this.varint()
    if (this.at + len > this.buf.length) throw new Error('a posting block ends in the middle of a term')
    const s = Buffer.from(this.buf.buffer, this.buf.byteOffset + this.at, len).toString('utf8')
    this.at += len
    return s
  }

  atEnd(): boolean {
    return this.at === this.buf.length
  }
}
