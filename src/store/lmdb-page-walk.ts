import { readSync } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'

// Page and node layout of the LMDB that lmdb-js 3.x builds (liblmdb/mdb.c in its dependencies,
// 64-bit): a 24-byte page header (pgno u64, txnid u64, pad u16, flags u16, lower u16, upper u16 —
// an overflow page keeps its page count, u32, where lower and upper are), then the u16 node offsets,
// counted from the end of the header (PAGEBASE = PAGEHDRSZ), so a page holds lower / 2 nodes and its
// nodes lie between upper and the page's end. A node: u16 lo, hi, flags, key size, then the key and
// the data. A branch node's child page is lo | hi << 16 | flags << 32; a leaf node's data size is
// lo | hi << 16. A leaf node with F_BIGDATA holds an MDB_ovpage (pgno, txnid, page count) for its
// overflow pages; one with F_SUBDATA an MDB_db record (a named database, or with F_DUPDATA a dupsort
// value's own tree); one with F_DUPDATA alone a sub-page (a small leaf page) of duplicate values.
const HEADER = 24
const P_BRANCH = 0x01
const P_LEAF = 0x02
const P_OVERFLOW = 0x04
const P_LEAF2 = 0x20
const P_SUBP = 0x40
const F_BIGDATA = 0x01
const F_SUBDATA = 0x02
const F_DUPDATA = 0x04
const MDB_DUPSORT = 0x04
const MDB_DUPFIXED = 0x10
const NODE = 8
const OVPAGE = 24
/** sizeof(MDB_db) */
export const DB_RECORD = 48
const P_INVALID = 0xffff_ffff_ffff_ffffn
const MAX_DEPTH = 32 // CURSOR_STACK: LMDB cannot walk a deeper tree
/** md_flags bits mdb_dbi_open accepts (VALID_FLAGS without MDB_CREATE, which is not stored). */
const DB_FLAGS = 0x02 | 0x04 | 0x08 | 0x10 | 0x20 | 0x40 | 0x100

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

/** One of the meta page's two trees: its record, which it is, and its name for the message. */
export interface TreeRoot {
  db: DbRecord
  kind: 'free' | 'main'
  name: string
}

/** The snapshot being walked. */
export interface Snapshot {
  pageSize: number
  /** Pages the file holds (its size over the page size). */
  filePages: bigint
  /** The snapshot's last page (mm_last_pg): LMDB refuses a page number past it. */
  lastPage: bigint
  /** The snapshot's transaction: no page of it was written by a later one. */
  txnid: bigint
}

type Kind = 'free' | 'main' | 'named' | 'dups'

interface Tree {
  name: string
  kind: Kind
  db: DbRecord
  counted: { branch: bigint; leaf: bigint; overflow: bigint; entries: bigint }
}

/** What a walk found: the first problem, or none, and how much of the file it read. */
export interface WalkResult {
  /** The first thing a reader of the snapshot would trip on, as a phrase ("its 'heads' database …"). */
  problem: string | null
  /** Pages read: every branch and leaf page, and the first page of each overflow run. */
  reads: number
  /** Named databases checked at their root page only: the page budget was spent (largest last). */
  rootOnly: string[]
}

/**
 * Walks the trees of a snapshot — the free-page tree (and the page lists it holds), the main tree
 * and every named database in it — through their branch, leaf and overflow pages, with normal reads
 * (never a mapping, so a page past the end of the file is an answer, not a SIGBUS), and finds the
 * first thing a reader of the snapshot would trip on. It checks what LMDB trusts without checking:
 * every page number lies in the snapshot and in the file; each page is the page it should be (its
 * number, its kind, a transaction no later than the snapshot's); its free-space bounds, node offsets,
 * key and data sizes stay inside the page; an overflow run lies in the file and holds its value; a
 * named database's record is sane; each tree has the depth, page counts and entry count its record
 * says (so a page number changed into another real page is found too). A value's bytes are not
 * checked: LMDB keeps no checksum of them, and a damaged value shows when it is read.
 *
 * Reads every branch and leaf page once (synchronously: at start-up nothing else waits, and it is
 * several times faster than a read per page through the thread pool), the first page of every
 * overflow run, and the overflow pages of the free-page lists. `budget` bounds the pages read (the
 * free-page and main trees are always walked): the named databases are walked smallest first, and
 * one that no longer fits is checked at its root page only (listed in `rootOnly`).
 */
export function findBrokenPage(fh: FileHandle, snap: Snapshot, roots: TreeRoot[], budget = Infinity): WalkResult {
  const walk = new PageWalk(fh, snap)
  const named: Tree[] = []
  const rootOnly: string[] = []
  const done = (problem: string | null): WalkResult => ({ problem, reads: walk.reads, rootOnly })
  for (const r of roots) {
    const problem = walk.tree({ ...r, counted: zero() }, named)
    if (problem) return done(problem)
  }
  // What walking a tree reads, as its record counts it: its tree pages and at most one first page per overflow page.
  const size = (t: Tree) => t.db.branchPages + t.db.leafPages + (t.db.entries < t.db.overflowPages ? t.db.entries : t.db.overflowPages)
  named.sort((a, b) => (size(a) < size(b) ? -1 : size(a) > size(b) ? 1 : 0))
  for (const t of named) {
    const whole = BigInt(walk.reads) + size(t) <= BigInt(Math.min(budget, Number.MAX_SAFE_INTEGER))
    if (!whole) rootOnly.push(t.name)
    const problem = walk.tree(t, named, !whole)
    if (problem) return done(problem)
  }
  return done(null)
}

function zero(): Tree['counted'] {
  return { branch: 0n, leaf: 0n, overflow: 0n, entries: 0n }
}

class PageWalk {
  private readonly seen = new Set<number>()
  private readonly page: Buffer
  private readonly head = Buffer.alloc(HEADER)

  constructor(
    private readonly fh: FileHandle,
    private readonly snap: Snapshot,
  ) {
    this.page = Buffer.alloc(snap.pageSize)
  }

  private read(buf: Buffer, length: number, position: number): { bytesRead: number } {
    return { bytesRead: readSync(this.fh.fd, buf, 0, length, position) }
  }

  /** Pages read so far (tree pages, first pages of overflow runs). */
  reads = 0

  /**
   * Walks one tree and the duplicate-value trees hanging from it; a problem, or null. The named
   * databases a main tree holds are added to `named`. `rootOnly`: read the root page only.
   */
  tree(tree: Tree, named: Tree[], rootOnly = false): string | null {
    const { db, name } = tree
    if (db.root === P_INVALID) {
      if (db.depth !== 0 || db.entries !== 0n || db.branchPages + db.leafPages + db.overflowPages !== 0n)
        return `its ${name} is empty but its record counts pages or entries`
      return null
    }
    if (db.depth < 1 || db.depth > MAX_DEPTH) return `its ${name} has a depth of ${db.depth}`
    const subtrees: Tree[] = []
    const stack: Array<{ pgno: bigint; depth: number }> = [{ pgno: db.root, depth: 1 }]
    while (stack.length > 0) {
      const { pgno, depth } = stack.pop()!
      const where = `page ${pgno} of its ${name}`
      const bad = this.pageNumber(pgno, 1n, `its ${name} references page ${pgno}`)
      if (bad) return bad
      if (rootOnly && depth > 1) continue
      if (this.seen.has(Number(pgno))) return `its ${name} references page ${pgno}, which another reference already uses`
      this.seen.add(Number(pgno))
      const page = this.page
      const { bytesRead } = this.read(page, page.length, Number(pgno) * page.length)
      this.reads++
      if (bytesRead < page.length) return `${where} is cut short`
      const problem = this.header(page, pgno)
      if (problem) return `${where} ${problem}`
      const flags = page.readUInt16LE(18)
      const lower = page.readUInt16LE(20)
      const count = lower >> 1
      const leaf = flags === P_LEAF || flags === (P_LEAF | P_LEAF2)
      if (!leaf && flags !== P_BRANCH) return `${where} is not a tree page (flags 0x${flags.toString(16)})`
      if (leaf !== (depth === db.depth)) return `${where} is a ${leaf ? 'leaf' : 'branch'} page at depth ${depth} of ${db.depth}`
      if (leaf) tree.counted.leaf++
      else tree.counted.branch++
      if (flags & P_LEAF2) {
        const dupfixed = tree.kind === 'dups' && (db.flags & MDB_DUPFIXED) !== 0
        if (!dupfixed) return `${where} is a fixed-size page in a tree of variable-size values`
        if (page.readUInt16LE(16) !== db.pad || count * db.pad > page.length - HEADER) return `${where} has values outside the page`
        tree.counted.entries += BigInt(count)
        continue
      }
      // LMDB asserts (and aborts the process) on a branch page with fewer than two children, except in the free-page tree.
      if (count < (leaf ? 1 : tree.kind === 'free' ? 1 : 2)) return `${where} holds ${count} nodes`
      for (let i = 0; i < count; i++) {
        const node = this.nodeAt(page, i, page.length)
        if (typeof node === 'string') return `${where} ${node}`
        const { at, flags: nodeFlags, ksize, lohi } = node
        if (!leaf) {
          stack.push({ pgno: lohi | (BigInt(nodeFlags) << 32n), depth: depth + 1 })
          continue
        }
        const data = at + NODE + ksize
        const found = this.leafNode(tree, page, data, nodeFlags, Number(lohi), tree.kind === 'main' ? named : subtrees, at)
        if (found) return `${where} ${found}`
      }
    }
    const c = tree.counted
    const dupsort = (db.flags & MDB_DUPSORT) !== 0 || tree.kind === 'dups'
    // A dupsort database counts its values' own trees in ways this walk does not model; its pages are still checked.
    if (!dupsort && !rootOnly) {
      for (const [what, counted, recorded] of [
        ['branch pages', c.branch, db.branchPages],
        ['leaf pages', c.leaf, db.leafPages],
        ['overflow pages', c.overflow, db.overflowPages],
        ['entries', c.entries, db.entries],
      ] as const) {
        if (counted !== recorded) return `its ${name} holds ${counted} ${what}, but its record says ${recorded}`
      }
    }
    for (const sub of subtrees) {
      const broken = this.tree(sub, named, rootOnly)
      if (broken) return broken
    }
    return null
  }

  /** A problem with a page number that must start a run of `pages` pages of this snapshot in this file, or null. */
  private pageNumber(pgno: bigint, pages: bigint, what: string): string | null {
    const { filePages, lastPage } = this.snap
    if (pgno < 2n || pages < 1n || pgno + pages - 1n > lastPage)
      return `${what}${pages > 1n ? ` (${pages} pages)` : ''}, outside the snapshot's pages 2…${lastPage}`
    if (pgno + pages > filePages) return `${what}${pages > 1n ? ` (${pages} pages)` : ''}, past the end of the file (${filePages} pages)`
    return null
  }

  /** What is wrong with a tree page's header, or null. */
  private header(page: Buffer, pgno: bigint): string | null {
    if (page.readBigUInt64LE(0) !== pgno) return `holds page ${page.readBigUInt64LE(0)}`
    // A page of a later transaction than the snapshot is one LMDB would take as its own dirty copy and write in place.
    if (page.readBigUInt64LE(8) > this.snap.txnid) return `was written by transaction ${page.readBigUInt64LE(8)}, after the snapshot's`
    return this.bounds(page, page.length)
  }

  /** The free-space bounds of a page (or sub-page) of `size` bytes, or what is wrong with them. */
  private bounds(page: Buffer, size: number): string | null {
    const lower = page.readUInt16LE(20)
    const upper = page.readUInt16LE(22)
    if ((page.readUInt16LE(18) & P_LEAF2) !== 0)
      return lower % 2 === 0 && lower <= size - HEADER ? null : `has bad bounds (${lower}, ${upper})`
    if (lower % 2 !== 0 || lower > upper || upper > size - HEADER) return `has bad bounds (lower ${lower}, upper ${upper})`
    return null
  }

  /** Node `i` of a page (or sub-page) of `size` bytes: where it is and its header, or what is wrong with it. */
  private nodeAt(page: Buffer, i: number, size: number): { at: number; flags: number; ksize: number; lohi: bigint } | string {
    const off = page.readUInt16LE(HEADER + 2 * i)
    const at = HEADER + off
    if (off % 2 !== 0 || off < page.readUInt16LE(22) || at + NODE > size) return `has node ${i} at ${off}, outside its nodes`
    const ksize = page.readUInt16LE(at + 6)
    if (at + NODE + ksize > size) return `has node ${i} with a ${ksize}-byte key, past the end of the page`
    const lohi = BigInt(page.readUInt16LE(at)) | (BigInt(page.readUInt16LE(at + 2)) << 16n)
    return { at, flags: page.readUInt16LE(at + 4), ksize, lohi }
  }

  /** Checks one leaf node's data (and collects the trees it holds); a problem, or null. */
  private leafNode(tree: Tree, page: Buffer, data: number, flags: number, dsize: number, subtrees: Tree[], at: number): string | null {
    const dupsort = tree.kind !== 'dups' && (tree.db.flags & MDB_DUPSORT) !== 0
    if (flags & ~(F_BIGDATA | F_SUBDATA | F_DUPDATA)) return `has a node with flags 0x${flags.toString(16)}`
    if (flags & F_BIGDATA) {
      if (flags !== F_BIGDATA) return `has a node with flags 0x${flags.toString(16)}`
      if (data + OVPAGE > page.length) return 'has a node whose overflow reference is past the end of the page'
      tree.counted.entries++
      return this.overflow(tree, page.readBigUInt64LE(data), page.readBigUInt64LE(data + 16), dsize, page.readBigUInt64LE(data + 8))
    }
    if (data + dsize > page.length) return `has a node with ${dsize} bytes of data, past the end of the page`
    if (flags === 0) {
      tree.counted.entries++
      return tree.kind === 'free' ? this.freeList(page.subarray(data, data + dsize)) : null
    }
    if ((flags & F_DUPDATA) !== 0 && !dupsort) return `has duplicate values in a database without them (flags 0x${flags.toString(16)})`
    if (flags & F_SUBDATA) {
      if (tree.kind !== 'main' && flags !== (F_SUBDATA | F_DUPDATA)) return 'has a database record outside the main tree'
      if (dsize !== DB_RECORD) return `has a database record of ${dsize} bytes`
      const db = readDbRecord(page, data)
      const key = page.toString('utf8', at + NODE, data).replace(/\0+$/, '')
      if (tree.kind === 'main') {
        if (db.flags & ~DB_FLAGS) return `holds the record of database '${key}' with flags 0x${db.flags.toString(16)}`
        tree.counted.entries++
        subtrees.push({ name: `'${key}' database`, kind: 'named', db, counted: zero() })
      } else {
        tree.counted.entries += db.entries
        subtrees.push({
          name: `${tree.name}'s duplicates`,
          kind: 'dups',
          db: { ...db, flags: tree.db.flags, pad: db.pad },
          counted: zero(),
        })
      }
      return null
    }
    // F_DUPDATA alone: a sub-page of duplicate values inside the node.
    const sub = page.subarray(data, data + dsize)
    if (dsize < HEADER || (sub.readUInt16LE(18) & (P_LEAF | P_SUBP)) !== (P_LEAF | P_SUBP))
      return 'has a damaged sub-page of duplicate values'
    const bad = this.bounds(sub, dsize)
    if (bad) return `has a sub-page of duplicate values that ${bad}`
    const n = sub.readUInt16LE(20) >> 1
    if (sub.readUInt16LE(18) & P_LEAF2) {
      if (n * sub.readUInt16LE(16) > dsize - HEADER) return 'has a sub-page of duplicate values past its end'
    } else {
      for (let i = 0; i < n; i++) {
        const node = this.nodeAt(sub, i, dsize)
        if (typeof node === 'string') return `has a sub-page of duplicate values that ${node}`
      }
    }
    tree.counted.entries += BigInt(n)
    return null
  }

  /** Checks an overflow run: in the snapshot and the file, headed as one, holding the value. */
  private overflow(tree: Tree, pgno: bigint, pages: bigint, dsize: number, txnid: bigint): string | null {
    const bad = this.pageNumber(pgno, pages, `references overflow page ${pgno}`)
    if (bad) return bad
    if (BigInt(dsize) > pages * BigInt(this.snap.pageSize) - BigInt(HEADER))
      return `has a ${dsize}-byte value on ${pages} overflow pages, which cannot hold it`
    if (txnid > this.snap.txnid) return `references overflow page ${pgno} of transaction ${txnid}, after the snapshot's`
    if (this.seen.has(Number(pgno))) return `references overflow page ${pgno}, which another reference already uses`
    this.seen.add(Number(pgno))
    const head = this.head
    this.reads++
    const { bytesRead } = this.read(head, HEADER, Number(pgno) * this.snap.pageSize)
    if (bytesRead < HEADER) return `references overflow page ${pgno}, which is cut short`
    if (head.readBigUInt64LE(0) !== pgno || (head.readUInt16LE(18) & P_OVERFLOW) === 0 || BigInt(head.readUInt32LE(20)) !== pages)
      return `references overflow page ${pgno}, which is not the start of a run of ${pages} overflow pages`
    tree.counted.overflow += pages
    if (tree.kind === 'free') {
      const value = Buffer.alloc(dsize)
      const { bytesRead: n } = this.read(value, dsize, Number(pgno) * this.snap.pageSize + HEADER)
      if (n < dsize) return `references overflow page ${pgno}, which is cut short`
      return this.freeList(value)
    }
    return null
  }

  /**
   * A record of the free-page tree: a count, then page numbers, a run being a negative length
   * followed by its first page (mdb_midl_xmerge). LMDB takes these pages for its next writes.
   */
  private freeList(value: Buffer): string | null {
    if (value.length < 8) return `has a free-page list of ${value.length} bytes`
    const count = value.readBigUInt64LE(0)
    if (count > BigInt(value.length / 8 - 1)) return `has a free-page list of ${count} pages in ${value.length} bytes`
    for (let i = 1; i <= Number(count); i++) {
      const entry = value.readBigInt64LE(8 * i)
      if (entry === 0n) continue
      let pages = 1n
      let pgno = entry
      if (entry < 0n) {
        if (i === Number(count)) return 'has a free-page list that ends inside a run'
        pages = -entry
        pgno = value.readBigInt64LE(8 * ++i)
      }
      if (pgno < 2n || pgno > this.snap.lastPage || pages > this.snap.lastPage)
        return `lists free page ${pgno}${pages > 1n ? ` (${pages} pages)` : ''}, outside the snapshot's pages 2…${this.snap.lastPage}`
    }
    return null
  }
}
