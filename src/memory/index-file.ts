import { createHash } from 'node:crypto'
import { closeSync, fstatSync, openSync, readSync } from 'node:fs'

/**
 * A saved HNSW index file that must not be loaded: truncated, overwritten, written for
 * another dimension or another tenant, or not the file this store last saved.
 */
export class DamagedIndexError extends Error {
  constructor(
    readonly file: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`memory index file ${file} is damaged: ${reason}`, options)
    this.name = 'DamagedIndexError'
  }
}

/** What a whole, consistent index file holds. */
export interface IndexFileFacts {
  bytes: number
  elements: number
  /** sha256 of the whole file (hex): recorded at save, compared at load. */
  sha256: string
}

export interface IndexFileExpectations {
  /** Vector length the file must have been built for. */
  dim: number
  /** Every label in the file must be below this (the labels the file claims to cover). */
  labelsBelow: number
}

// hnswlib's saveIndex (hnswalg.h) writes, little-endian on the 64-bit platforms we run on:
// size_t offsetLevel0, max_elements, cur_element_count, size_data_per_element, label_offset,
// offsetData; int maxlevel; uint32 enterpoint_node; size_t maxM, maxM0, M; double mult;
// size_t ef_construction — 96 bytes. Then cur_element_count level-0 records of
// size_data_per_element bytes (uint16 link count, a flags byte, a pad byte, maxM0 uint32
// links; the vector as float32; the uint64 label), then per element a uint32 byte length
// and that many bytes of upper-level link lists (maxM·4+4 bytes per level).
const HEADER_BYTES = 96
const CHUNK = 1 << 20
/** No index this store writes has more levels; hnswlib's expected top level is about ln(n)/ln(M). */
const MAX_LEVEL = 64
const NO_ENTRY_POINT = 0xffffffff

/**
 * Checks a saved index file without the native addon: hnswlib trusts its input (a bad
 * link, count or size makes it read or allocate out of bounds and take the process down),
 * so every count, offset, link target and label is checked against the header and the
 * file's length before `readIndex` may see it. Streams the file in 1 MiB chunks (an
 * index can be larger than we want to hold twice) and hashes it on the way.
 * Throws {@link DamagedIndexError}; a file that passes is safe to hand to hnswlib.
 */
export function inspectIndexFile(path: string, expect: IndexFileExpectations): IndexFileFacts {
  let fd: number
  try {
    fd = openSync(path, 'r')
  } catch (err) {
    throw new DamagedIndexError(path, `cannot be opened (${(err as NodeJS.ErrnoException).code ?? String(err)})`, { cause: err })
  }
  try {
    return walk(new ChunkReader(path, fd), expect)
  } catch (err) {
    if (err instanceof DamagedIndexError) throw err
    throw new DamagedIndexError(path, `cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`, { cause: err })
  } finally {
    closeSync(fd)
  }
}

function walk(r: ChunkReader, expect: IndexFileExpectations): IndexFileFacts {
  const bad = (reason: string) => new DamagedIndexError(r.path, reason)
  if (r.size < HEADER_BYTES) throw bad(`${r.size} bytes, shorter than the ${HEADER_BYTES}-byte header`)
  const offsetLevel0 = r.u64()
  const maxElements = r.u64()
  const count = r.u64()
  const perElement = r.u64()
  const labelOffset = r.u64()
  const offsetData = r.u64()
  const maxLevel = r.i32()
  const entryPoint = r.u32()
  const maxM = r.u64()
  const maxM0 = r.u64()
  const m = r.u64()
  const mult = r.f64()
  r.u64() // ef_construction: any value is safe

  if (m < 2 || m > 4096 || maxM !== m || maxM0 !== 2 * m) throw bad(`implausible M (${m}, ${maxM}, ${maxM0})`)
  const level0Links = maxM0 * 4 + 4
  const levelLinks = maxM * 4 + 4
  const vectorBytes = expect.dim * 4
  if (offsetLevel0 !== 0 || offsetData !== level0Links || labelOffset !== level0Links + vectorBytes || perElement !== labelOffset + 8) {
    throw bad(`its record layout does not fit ${expect.dim}-dimensional vectors (${perElement} bytes per element)`)
  }
  if (!Number.isFinite(mult) || mult <= 0) throw bad('implausible level multiplier')
  // hnswlib allocates max_elements records (and a mutex each) up front: a huge value is an out-of-memory kill.
  if (count > maxElements || maxElements > Math.max(4096, 4 * count)) throw bad(`implausible capacity (${count} of ${maxElements})`)
  if (count === 0 ? entryPoint !== NO_ENTRY_POINT || maxLevel !== -1 : entryPoint >= count || maxLevel < 0 || maxLevel > MAX_LEVEL) {
    throw bad(`implausible entry point (${entryPoint} at level ${maxLevel} of ${count} elements)`)
  }
  const expectedMin = HEADER_BYTES + count * (perElement + 4)
  if (r.size < expectedMin) throw bad(`${r.size} bytes, shorter than the ${expectedMin} its ${count} elements need`)

  // hnswlib follows a link at level L into the target's level-L list without checking that
  // the target has one: every upper-level link must reach an element that high. Targets
  // later in the file are checked when their level is read (`need`: the highest level asked).
  const levels = new Uint8Array(count)
  const need = new Uint8Array(count)
  const links = (at: number, max: number, level: number, what: string) => {
    const n = r.view.getUint16(at, true)
    if (n > max) throw bad(`${what} has ${n} links, more than ${max}`)
    for (let i = 0; i < n; i++) {
      const to = r.view.getUint32(at + 4 + 4 * i, true)
      if (to >= count) throw bad(`${what} links to an element that does not exist`)
      if (level > 0 && to < e && levels[to]! < level) throw bad(`${what} links to element ${to}, which has no level ${level}`)
      if (level > need[to]!) need[to] = level
    }
  }
  // Labels seen (a bit each): a label twice would make hnswlib answer it twice.
  const seen = new Uint8Array(Math.ceil(expect.labelsBelow / 8))
  let e = 0
  for (; e < count; e++) {
    const at = r.take(perElement)
    links(at, maxM0, 0, `element ${e}`)
    const label = r.view.getBigUint64(at + labelOffset, true)
    if (label >= BigInt(expect.labelsBelow)) throw bad(`element ${e} has label ${label}, beyond the ${expect.labelsBelow} it may cover`)
    const l = Number(label)
    if (seen[l >> 3]! & (1 << (l & 7))) throw bad(`label ${l} appears twice`)
    seen[l >> 3]! |= 1 << (l & 7)
  }
  for (e = 0; e < count; e++) {
    const bytes = r.u32()
    if (bytes % levelLinks !== 0 || bytes / levelLinks > maxLevel) throw bad(`element ${e} has ${bytes} bytes of upper-level links`)
    levels[e] = bytes / levelLinks
    if (need[e]! > levels[e]!) throw bad(`element ${e} is linked at level ${need[e]} but has no such level`)
    const at = r.take(bytes)
    for (let l = 0; l < levels[e]!; l++) links(at + l * levelLinks, maxM, l + 1, `element ${e} at level ${l + 1}`)
  }
  if (count > 0 && levels[entryPoint] !== maxLevel) throw bad(`the entry point ${entryPoint} is not at the top level ${maxLevel}`)
  if (r.offset !== r.size) throw bad(`${r.size - r.offset} bytes after the last element`)
  return { bytes: r.size, elements: count, sha256: r.digest() }
}

/** Sequential reads through a fixed buffer; every byte is hashed exactly once, when first read. */
class ChunkReader {
  readonly size: number
  /** View of the buffer; offsets returned by take() index into it. */
  view: DataView
  private buf: Buffer
  /** File offset of buf[0], and how many bytes of buf are filled / consumed. */
  private base = 0
  private filled = 0
  private used = 0
  private readonly hash = createHash('sha256')

  constructor(
    readonly path: string,
    private readonly fd: number,
  ) {
    this.size = fstatSync(fd).size
    this.buf = Buffer.alloc(CHUNK)
    this.view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength)
  }

  get offset(): number {
    return this.base + this.used
  }

  /** Makes the next `n` bytes available and returns their offset in `view`. */
  take(n: number): number {
    if (this.offset + n > this.size)
      throw new DamagedIndexError(this.path, `ends inside a record at byte ${this.offset} (${this.size} bytes)`)
    if (this.used + n > this.filled) this.fill(n)
    const at = this.used
    this.used += n
    return at
  }

  u32(): number {
    return this.view.getUint32(this.take(4), true)
  }
  i32(): number {
    return this.view.getInt32(this.take(4), true)
  }
  f64(): number {
    return this.view.getFloat64(this.take(8), true)
  }
  u64(): number {
    const v = this.view.getBigUint64(this.take(8), true)
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new DamagedIndexError(this.path, `implausible header value ${v}`)
    return Number(v)
  }

  digest(): string {
    return this.hash.digest('hex')
  }

  private fill(n: number): void {
    const rest = this.filled - this.used
    if (n > this.buf.length) {
      const bigger = Buffer.alloc(n)
      this.buf.copy(bigger, 0, this.used, this.filled)
      this.buf = bigger
      this.view = new DataView(bigger.buffer, bigger.byteOffset, bigger.byteLength)
    } else {
      this.buf.copy(this.buf, 0, this.used, this.filled)
    }
    this.base += this.used
    this.used = 0
    this.filled = rest
    while (this.filled < n) {
      const want = Math.min(this.buf.length - this.filled, this.size - this.base - this.filled)
      const got = readSync(this.fd, this.buf, this.filled, want, this.base + this.filled)
      if (got === 0) throw new DamagedIndexError(this.path, `shrank while being read (at byte ${this.base + this.filled})`)
      this.hash.update(this.buf.subarray(this.filled, this.filled + got))
      this.filled += got
    }
  }
}
