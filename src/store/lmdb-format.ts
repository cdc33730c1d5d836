// Page and node layout of the LMDB that lmdb-js 3.x builds (liblmdb/mdb.c in its dependencies,
// 64-bit): a 24-byte page header (pgno u64, txnid u64, pad u16, flags u16, lower u16, upper u16 —
// an overflow page keeps its page count, u32, where lower and upper are), then the u16 node offsets,
// counted from the end of the header (PAGEBASE = PAGEHDRSZ), so a page holds lower / 2 nodes and its
// nodes lie between upper and the page's end. A node: u16 lo, hi, flags, key size, then the key and
// the data. A branch node's child page is lo | hi << 16 | flags << 32; a leaf node's data size is
// lo | hi << 16. A leaf node with F_BIGDATA holds an MDB_ovpage (pgno, txnid, page count) for its
// overflow pages; one with F_SUBDATA an MDB_db record (a named database, or with F_DUPDATA a dupsort
// value's own tree); one with F_DUPDATA alone a sub-page (a small leaf page) of duplicate values.
export const HEADER = 24
export const P_BRANCH = 0x01
export const P_LEAF = 0x02
export const P_OVERFLOW = 0x04
export const P_LEAF2 = 0x20
export const P_SUBP = 0x40
export const F_BIGDATA = 0x01
export const F_SUBDATA = 0x02
export const F_DUPDATA = 0x04
export const MDB_REVERSEKEY = 0x02
export const MDB_DUPSORT = 0x04
export const MDB_INTEGERKEY = 0x08
export const MDB_DUPFIXED = 0x10
export const NODE = 8
export const OVPAGE = 24
/** sizeof(MDB_db) */
export const DB_RECORD = 48
export const P_INVALID = 0xffff_ffff_ffff_ffffn
export const MAX_DEPTH = 32 // CURSOR_STACK: LMDB cannot walk a deeper tree
/** md_flags bits mdb_dbi_open accepts (VALID_FLAGS without MDB_CREATE, which is not stored). */
export const DB_FLAGS = 0x02 | 0x04 | 0x08 | 0x10 | 0x20 | 0x40 | 0x100

/** An MDB_db record: a tree's root and LMDB's own count of its pages and entries. */
export interface DbRecord {
  /** md_pad: for a DUPFIXED value tree, the size of its values. */
  pad: number
  flags: number
  depth: number
  branchPages: bigint
  leafPages: bigint
  overflowPages: bigint
  entries: bigint
  root: bigint
}

export function readDbRecord(buf: Buffer, at: number): DbRecord {
  return {
    pad: buf.readUInt32LE(at),
    flags: buf.readUInt16LE(at + 4),
    depth: buf.readUInt16LE(at + 6),
    branchPages: buf.readBigUInt64LE(at + 8),
    leafPages: buf.readBigUInt64LE(at + 16),
    overflowPages: buf.readBigUInt64LE(at + 24),
    entries: buf.readBigUInt64LE(at + 32),
    root: buf.readBigUInt64LE(at + 40),
  }
}

/** The free-space bounds of a page (or sub-page) of `size` bytes, or what is wrong with them. */
export function pageBounds(page: Buffer, size: number): string | null {
  const lower = page.readUInt16LE(20)
  const upper = page.readUInt16LE(22)
  if ((page.readUInt16LE(18) & P_LEAF2) !== 0)
    return lower % 2 === 0 && lower <= size - HEADER ? null : `has bad bounds (${lower}, ${upper})`
  if (lower % 2 !== 0 || lower > upper || upper > size - HEADER) return `has bad bounds (lower ${lower}, upper ${upper})`
  return null
}

/** Node `i` of a page (or sub-page) of `size` bytes: where it is and its header, or what is wrong with it. */
export function nodeAt(page: Buffer, i: number, size: number): { at: number; flags: number; ksize: number; lohi: bigint } | string {
  const off = page.readUInt16LE(HEADER + 2 * i)
  const at = HEADER + off
  if (off % 2 !== 0 || off < page.readUInt16LE(22) || at + NODE > size) return `has node ${i} at ${off}, outside its nodes`
  const ksize = page.readUInt16LE(at + 6)
  if (at + NODE + ksize > size) return `has node ${i} with a ${ksize}-byte key, past the end of the page`
  const lohi = BigInt(page.readUInt16LE(at)) | (BigInt(page.readUInt16LE(at + 2)) << 16n)
  return { at, flags: page.readUInt16LE(at + 4), ksize, lohi }
}
