import { open, stat, type FileHandle } from 'node:fs/promises'
import { DB_RECORD, HEADER as PAGE_HEADER, MAX_DEPTH, P_INVALID, readDbRecord, type DbRecord } from './lmdb-format.js'
import { findBrokenPage, type ValueChecks } from './lmdb-page-walk.js'

/**
 * What a look at an LMDB data file, before LMDB maps it, found.
 *
 * - `absent`: no file, or an empty one; LMDB creates a new environment there.
 * - `ok`: the snapshot LMDB will open is intact as far as its meta pages tell, the file holds every
 *   page its trees use, and those pages are sound (lmdb-page-walk.ts: what a reader trusts, not the
 *   bytes of values).
 *   `note` says when a meta page was damaged but is one LMDB ignores (it falls back to the other one,
 *   which may be one transaction older).
 * - `damaged`: opening would crash the process (SIGBUS/SIGSEGV) or be refused; `problem` says why,
 *   as a phrase that follows the file's name ("is truncated: …").
 * - `unreadable`: the file cannot be read (permissions, I/O error); `code` is the errno code.
 */
export type LmdbFileCheck =
  | { state: 'absent' }
  | {
      state: 'ok'
      pageSize: number
      txnid: bigint
      lastPage: bigint
      fileSize: number
      /** Pages the walk read, and the named databases it checked at their root page only. */
      walked: { reads: number; rootOnly: string[] }
      note?: string
    }
  | { state: 'damaged'; problem: string }
  | { state: 'unreadable'; code: string; problem: string }

// On-disk layout of the LMDB that lmdb-js 3.x builds (dependencies/lmdb/libraries/liblmdb/mdb.c,
// 64-bit): its page header has a txnid besides upstream LMDB's pgno/pad/flags/lower-upper, so it is
// 24 bytes, not 16. MDB_meta follows the header of pages 0 and 1. With MDB_OVERLAPPINGSYNC (lmdb-js's
// default unless noSync) a third copy, of the last flushed snapshot, sits half a page into page 0 and
// takes part in choosing the snapshot when the environment is opened (mdb_env_read_header).
const PAGE_FLAGS = 18
const P_META = 0x08
const MAGIC = 0xbeefc0de
const DATA_VERSION = 2
const META_SIZE = 144
const FREE_DB = 24
const MAIN_DB = FREE_DB + DB_RECORD
const LAST_PAGE = MAIN_DB + DB_RECORD
const TXNID = LAST_PAGE + 8
const MIN_PAGE = 512
const MAX_PAGE = 0x10000
/**
 * Pages the walk reads at most: every branch and leaf page, and the first page of each overflow run
 * (which hold most of a session store's bytes and are not read further). About 5 µs a page from the
 * page cache, so at most about 0.6 s; a session store of 2,000 sessions of five turns (169 MiB)
 * takes 13,000 reads and about 70 ms, so stores up to roughly ten times that are walked whole. Past
 * the budget the largest named databases (the event log first) are checked at their root page only.
 */
export const WALK_BUDGET_PAGES = 1 << 17

interface Meta {
  pageSize: number
  lastPage: bigint
  txnid: bigint
  free: DbRecord
  main: DbRecord
  flaw: string | null
}

/**
 * Checks an LMDB data file (`data.mdb`) before it is opened: LMDB maps the file and trusts its pages,
 * so a truncated file or garbage in the meta or a tree page it reads ends in SIGBUS, SIGSEGV, an
 * assertion's abort or an MDB_CORRUPTED thrown from wherever it is read, not a clear refusal.
 * Mirrors LMDB's choice: meta page 0 must be valid (LMDB reads its page size there); of the metas it
 * compares, the one with the largest txnid is used, so that one must be valid. Then that snapshot's
 * trees are walked (lmdb-page-walk.ts), within WALK_BUDGET_PAGES: every page they use must be in the
 * file (a file may end before the snapshot's last page when the pages past its end are free) and
 * sound as far as LMDB relies on it.
 */
export async function checkLmdbFile(path: string, values?: ValueChecks): Promise<LmdbFileCheck> {
  let size: number
  try {
    const s = await stat(path)
    if (!s.isFile()) return { state: 'damaged', problem: 'is not a regular file' }
    size = s.size
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'EIO'
    if (code === 'ENOENT') return { state: 'absent' }
    return { state: 'unreadable', code, problem: `cannot be read (${code})` }
  }
  if (size === 0) return { state: 'absent' }
  let fh: FileHandle
  try {
    fh = await open(path, 'r')
  } catch (err) {
    return unreadable(err)
  }
  try {
    return await inspect(fh, size, values)
  } catch (err) {
    return unreadable(err)
  } finally {
    await fh.close()
  }
}

async function inspect(fh: FileHandle, size: number, values: ValueChecks | undefined): Promise<LmdbFileCheck> {
  const page0 = await readAt(fh, 0, PAGE_HEADER + META_SIZE)
  if (page0.length < PAGE_HEADER + META_SIZE)
    return { state: 'damaged', problem: `is truncated: ${size} bytes, shorter than its first meta page` }
  const m0 = parseMeta(page0, true, null)
  if (m0.flaw) return { state: 'damaged', problem: `has a damaged meta page 0 (${m0.flaw})` }
  const ps = m0.pageSize
  let chosen = m0
  let note: string | undefined
  for (const [at, where, stamped] of [
    [ps / 2, 'copy of the flushed meta in page 0', false],
    [ps, 'meta page 1', true],
  ] as const) {
    const buf = await readAt(fh, at, PAGE_HEADER + META_SIZE)
    if (buf.length < PAGE_HEADER + META_SIZE)
      return { state: 'damaged', problem: `is truncated: ${size} bytes, shorter than its second meta page` }
    const m = parseMeta(buf, stamped, ps)
    if (m.txnid <= chosen.txnid) {
      if (m.flaw && stamped)
        note = `${where} is damaged (${m.flaw}); LMDB uses the snapshot of transaction ${chosen.txnid}, so the last transaction may be lost`
      continue
    }
    if (m.flaw) return { state: 'damaged', problem: `has a damaged ${where} (${m.flaw}), the one LMDB would open` }
    chosen = m
  }
  const filePages = BigInt(Math.floor(size / ps))
  // Every page the snapshot's trees use, before LMDB maps any of them. A file shorter than the
  // snapshot's last page is fine when the pages past its end are free (pages a transaction took and
  // gave back are never written), a crash waiting to happen when a tree still uses one.
  const walk = findBrokenPage(
    fh,
    { pageSize: ps, filePages, lastPage: chosen.lastPage, txnid: chosen.txnid },
    [
      { db: chosen.free, kind: 'free', name: 'free-page tree' },
      { db: chosen.main, kind: 'main', name: 'main tree' },
    ],
    WALK_BUDGET_PAGES,
    values,
  )
  if (walk.problem) {
    const problem =
      filePages <= chosen.lastPage ? `is truncated or damaged: ${size} bytes, and ${walk.problem}` : `is damaged: ${walk.problem}`
    return { state: 'damaged', problem }
  }
  return {
    state: 'ok',
    pageSize: ps,
    txnid: chosen.txnid,
    lastPage: chosen.lastPage,
    fileSize: size,
    walked: { reads: walk.reads, rootOnly: walk.rootOnly },
    ...(note ? { note } : {}),
  }
}

function unreadable(err: unknown): LmdbFileCheck {
  const code = (err as NodeJS.ErrnoException).code ?? 'EIO'
  return { state: 'unreadable', code, problem: `cannot be read (${code})` }
}

async function readAt(fh: FileHandle, position: number, length: number): Promise<Buffer> {
  const buf = Buffer.alloc(length)
  const { bytesRead } = await fh.read(buf, 0, length, position)
  return buf.subarray(0, bytesRead)
}

function isPageSize(n: number): boolean {
  return n >= MIN_PAGE && n <= MAX_PAGE && (n & (n - 1)) === 0
}

/**
 * One meta and what is wrong with it, if anything. `stamped`: a meta at the start of a page, which has
 * a page header and the magic and version (the flushed copy has neither). `pageSize`: meta page 0's,
 * which every other meta must repeat.
 */
function parseMeta(page: Buffer, stamped: boolean, pageSize: number | null): Meta {
  const m = page.subarray(PAGE_HEADER)
  const ps = m.readUInt32LE(FREE_DB)
  const lastPage = m.readBigUInt64LE(LAST_PAGE)
  const txnid = m.readBigUInt64LE(TXNID)
  const flaw = (() => {
    if (stamped && (page.readUInt16LE(PAGE_FLAGS) & P_META) === 0) return 'not marked as a meta page'
    if (stamped && m.readUInt32LE(0) !== MAGIC) return 'no LMDB magic number'
    if (stamped && (m.readUInt32LE(4) & 0xffff) !== DATA_VERSION)
      return `format version ${m.readUInt32LE(4) & 0xffff}, expected ${DATA_VERSION}`
    if (!isPageSize(ps) || (pageSize !== null && ps !== pageSize)) return `page size ${ps}`
    if (lastPage < 1n) return `last page ${lastPage}`
    for (const [off, name] of [
      [FREE_DB, 'free-page'],
      [MAIN_DB, 'main'],
    ] as const) {
      const root = m.readBigUInt64LE(off + 40)
      if (root !== P_INVALID && (root < 2n || root > lastPage)) return `${name} tree root ${root} outside pages 2…${lastPage}`
      if (m.readUInt16LE(off + 6) > MAX_DEPTH) return `${name} tree depth ${m.readUInt16LE(off + 6)}`
      for (let f = 8; f <= 24; f += 8) if (m.readBigUInt64LE(off + f) > lastPage) return `${name} tree page count beyond its last page`
    }
    return null
  })()
  return { pageSize: ps, lastPage, txnid, free: readDbRecord(m, FREE_DB), main: readDbRecord(m, MAIN_DB), flaw }
}
