import type { FileHandle } from 'node:fs/promises'

// Page and node layout of the LMDB that lmdb-js 3.x builds (liblmdb/mdb.c in its dependencies,
// 64-bit): a 24-byte page header (pgno, txnid, pad, flags, lower/upper), then the u16 node offsets,
// counted from the end of the header (PAGEBASE = PAGEHDRSZ). A node: u16 lo, hi, flags, key size,
// then the key and the data. A branch node's child page is lo | hi << 16 | flags << 32; a leaf node
// with F_BIGDATA holds an MDB_ovpage (pgno, txnid, page count) for its overflow pages; one with
// F_SUBDATA holds an MDB_db record (a named database, or a dupsort value's own tree).
const HEADER = 24
const P_BRANCH = 0x01
const P_LEAF = 0x02
const P_LEAF2 = 0x20
const F_BIGDATA = 0x01
const F_SUBDATA = 0x02
const NODE = 8
const DB_ROOT = 40
const P_INVALID = 0xffff_ffff_ffff_ffffn
const MAX_DEPTH = 32

/** One B-tree to walk: its root page and what it is, for the message. */
export interface TreeRoot {
  root: bigint
  name: string
}

/**
 * Walks every tree of a snapshot (the free-page tree, the main tree and every named database in it)
 * through its branch and leaf pages, and returns the first problem that would crash a reader of a
 * file of `filePages` pages: a page (or overflow run) it references beyond the end of the file, or a
 * page that is not the tree page it should be. `null` when every referenced page is in the file.
 *
 * Reads every branch and leaf page (not overflow contents): run it only when the cheap check, the
 * file's size against the snapshot's last page, cannot tell (a file may legitimately end before its
 * last page when the pages past its end are free).
 */
export async function findBrokenPage(fh: FileHandle, pageSize: number, filePages: bigint, roots: TreeRoot[]): Promise<string | null> {
  const seen = new Set<bigint>()
  const stack = roots.filter((r) => r.root !== P_INVALID).map((r) => ({ pgno: r.root, depth: 1, tree: r.name, isMain: r.name === 'main' }))
  const page = Buffer.alloc(pageSize)
  while (stack.length > 0) {
    const { pgno, depth, tree, isMain } = stack.pop()!
    if (pgno >= filePages) return `its ${tree} tree references page ${pgno}, past the end of the file (${filePages} pages)`
    if (seen.has(pgno)) return `its ${tree} tree references page ${pgno} twice`
    if (depth > MAX_DEPTH) return `its ${tree} tree is deeper than ${MAX_DEPTH} pages`
    seen.add(pgno)
    const { bytesRead } = await fh.read(page, 0, pageSize, Number(pgno) * pageSize)
    if (bytesRead < pageSize) return `page ${pgno} of its ${tree} tree is cut short`
    if (page.readBigUInt64LE(0) !== pgno) return `page ${pgno} of its ${tree} tree holds page ${page.readBigUInt64LE(0)}`
    const flags = page.readUInt16LE(18)
    if (flags & P_LEAF2) continue // fixed-size keys only: no references
    const branch = (flags & P_BRANCH) !== 0
    if (!branch && (flags & P_LEAF) === 0) return `page ${pgno} of its ${tree} tree is not a tree page (flags 0x${flags.toString(16)})`
    const count = page.readUInt16LE(20) >> 1
    for (let i = 0; i < count; i++) {
      const at = HEADER + page.readUInt16LE(HEADER + 2 * i)
      if (at + NODE > pageSize) return `page ${pgno} of its ${tree} tree has a node outside the page`
      const lo = BigInt(page.readUInt16LE(at))
      const hi = BigInt(page.readUInt16LE(at + 2))
      const nodeFlags = page.readUInt16LE(at + 4)
      const data = at + NODE + page.readUInt16LE(at + 6)
      if (branch) {
        stack.push({ pgno: lo | (hi << 16n) | (BigInt(nodeFlags) << 32n), depth: depth + 1, tree, isMain })
      } else if (nodeFlags & F_BIGDATA) {
        if (data + 24 > pageSize) return `page ${pgno} of its ${tree} tree has a node outside the page`
        const first = page.readBigUInt64LE(data)
        const last = first + page.readBigUInt64LE(data + 16) - 1n
        if (last >= filePages)
          return `its ${tree} tree references overflow pages ${first}…${last}, past the end of the file (${filePages} pages)`
      } else if (nodeFlags & F_SUBDATA) {
        if (data + DB_ROOT + 8 > pageSize) return `page ${pgno} of its ${tree} tree has a node outside the page`
        const root = page.readBigUInt64LE(data + DB_ROOT)
        const name = isMain ? `'${page.toString('utf8', at + NODE, data).replace(/\0+$/, '')}' database` : tree
        if (root !== P_INVALID) stack.push({ pgno: root, depth: 1, tree: name, isMain: false })
      }
    }
  }
  return null
}
