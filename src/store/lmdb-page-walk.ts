import { readSync } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import {
  DB_FLAGS,
  DB_RECORD,
  F_BIGDATA,
  F_DUPDATA,
  F_SUBDATA,
  HEADER,
  MAX_DEPTH,
  MDB_DUPFIXED,
  MDB_DUPSORT,
  MDB_INTEGERKEY,
  MDB_REVERSEKEY,
  NODE,
  OVPAGE,
  P_BRANCH,
  P_INVALID,
  P_LEAF,
  P_LEAF2,
  P_OVERFLOW,
  P_SUBP,
  nodeAt,
  pageBounds,
  readDbRecord,
  type DbRecord,
} from './lmdb-format.js'

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
  /** A named database's name (its key in the main tree); '' for the others. */
  key: string
  kind: Kind
  db: DbRecord
  counted: { branch: bigint; leaf: bigint; overflow: bigint; entries: bigint }
  /** The check of its values, if any. */
  check?: ((value: Buffer) => string | null) | undefined
  /** Shown each inline entry, if set. */
  saw?: ((db: string, key: Buffer, value: Buffer) => void) | undefined
}

/**
 * What the walk checks of the values of named databases, besides their sizes. The database named
 * `first` is walked before the others, and `saw` is shown its entries (a store's schema version, say,
 * which decides how its values are encoded); `of` is then asked, as the walk comes to each named
 * database, for the check of its values: a problem with a value's bytes as a phrase ("is not JSON
 * text"), or null; undefined for a database whose values are not checked.
 */
export interface ValueChecks {
  first?: string
  saw?(db: string, key: Buffer, value: Buffer): void
  of(db: string): ((value: Buffer) => string | null) | undefined
}

const UNCHECKED: ValueChecks = { of: () => undefined }

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
 * says (so a page number changed into another real page is found too); the keys of the main tree and
 * of every named database with LMDB's default order are in order, in their page and between the keys
 * of the branch pages above it (damage to a key that keeps the order is not found: LMDB keeps no
 * checksum). A value's bytes are checked only where `values` names a check for its database (the
 * overflow pages of those values are then read whole, and count against the budget).
 *
 * Reads every branch and leaf page once (synchronously: at start-up nothing else waits, and it is
 * several times faster than a read per page through the thread pool), the first page of every
 * overflow run, and the overflow pages of the free-page lists. `budget` bounds the pages read (the
 * free-page and main trees are always walked): the named databases are walked smallest first, and
 * one that no longer fits is checked at its root page only (listed in `rootOnly`).
 */
export function findBrokenPage(
  fh: FileHandle,
  snap: Snapshot,
  roots: TreeRoot[],
  budget = Infinity,
  values: ValueChecks = UNCHECKED,
): WalkResult {
  const walk = new PageWalk(fh, snap)
  const named: Tree[] = []
  const rootOnly: string[] = []
  const done = (problem: string | null): WalkResult => ({ problem, reads: walk.reads, rootOnly })
  for (const r of roots) {
    const problem = walk.tree({ ...r, key: '', counted: zero() }, named)
    if (problem) return done(problem)
  }
  // What walking a tree reads, as its record counts it: its tree pages, and its overflow pages
  // (read whole where its values are checked; at most one first page per overflow page otherwise).
  const size = (t: Tree) => t.db.branchPages + t.db.leafPages + t.db.overflowPages
  named.sort((a, b) => (a.key === values.first ? -1 : b.key === values.first ? 1 : size(a) < size(b) ? -1 : size(a) > size(b) ? 1 : 0))
  for (const t of named) {
    t.check = values.of(t.key)
    if (t.key === values.first) t.saw = values.saw
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
    // LMDB's default order (bytewise) is the one lmdb-js keeps for keys; integer and reversed keys are not checked.
    const ordered = (tree.kind === 'main' || tree.kind === 'named') && (db.flags & (MDB_REVERSEKEY | MDB_INTEGERKEY)) === 0
    // Each page with the keys its parent's separators bound it by: lo <= key < hi.
    const stack: Array<{ pgno: bigint; depth: number; lo: Buffer | null; hi: Buffer | null }> = [
      { pgno: db.root, depth: 1, lo: null, hi: null },
    ]
    while (stack.length > 0) {
      const { pgno, depth, lo, hi } = stack.pop()!
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
      const children: Array<{ pgno: bigint; depth: number; lo: Buffer | null; hi: Buffer | null }> = []
      let previous: Buffer | null = null
      for (let i = 0; i < count; i++) {
        const node = nodeAt(page, i, page.length)
        if (typeof node === 'string') return `${where} ${node}`
        const { at, flags: nodeFlags, ksize, lohi } = node
        // A branch page's first key is not used: its child holds the keys below the second.
        const key = ordered && (leaf || i > 0) ? page.subarray(at + NODE, at + NODE + ksize) : null
        if (key) {
          if ((lo && key.compare(lo) < 0) || (hi && key.compare(hi) >= 0)) return `${where} has key ${i} outside its branch's range`
          if (previous && key.compare(previous) <= 0) return `${where} has key ${i} out of order`
          previous = key
        }
        if (!leaf) {
          if (i > 0) children[i - 1]!.hi = key && Buffer.from(key)
          children.push({ pgno: lohi | (BigInt(nodeFlags) << 32n), depth: depth + 1, lo: i === 0 ? lo : key && Buffer.from(key), hi })
          continue
        }
        const data = at + NODE + ksize
        const found = this.leafNode(tree, page, data, nodeFlags, Number(lohi), tree.kind === 'main' ? named : subtrees, at)
        if (found) return `${where} ${found}`
      }
      stack.push(...children)
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
    return pageBounds(page, page.length)
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
      if (tree.kind === 'free') return this.freeList(page.subarray(data, data + dsize))
      if (tree.kind !== 'named') return null
      tree.saw?.(tree.key, page.subarray(at + NODE, data), page.subarray(data, data + dsize))
      const bad = tree.check?.(page.subarray(data, data + dsize))
      return bad ? `has a value that ${bad}` : null
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
        subtrees.push({ name: `'${key}' database`, key, kind: 'named', db, counted: zero() })
      } else {
        tree.counted.entries += db.entries
        subtrees.push({
          name: `${tree.name}'s duplicates`,
          key: tree.key,
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
    const bad = pageBounds(sub, dsize)
    if (bad) return `has a sub-page of duplicate values that ${bad}`
    const n = sub.readUInt16LE(20) >> 1
    if (sub.readUInt16LE(18) & P_LEAF2) {
      if (n * sub.readUInt16LE(16) > dsize - HEADER) return 'has a sub-page of duplicate values past its end'
    } else {
      for (let i = 0; i < n; i++) {
        const node = nodeAt(sub, i, dsize)
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
    const check = tree.kind === 'named' ? tree.check : undefined
    if (tree.kind === 'free' || check) {
      const value = Buffer.allocUnsafe(dsize)
      const { bytesRead: n } = this.read(value, dsize, Number(pgno) * this.snap.pageSize + HEADER)
      if (n < dsize) return `references overflow page ${pgno}, which is cut short`
      if (check) {
        this.reads += Number(pages) - 1
        const bad = check(value)
        return bad ? `has a value on overflow page ${pgno} that ${bad}` : null
      }
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
