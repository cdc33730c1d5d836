// Where the pages of a healthy LMDB data file are, for tests that damage it on purpose: the meta LMDB
// opens, and every branch and leaf page its trees use with the byte ranges a reader follows in it.
// Written apart from src/store/lmdb-page-walk.ts (the code under test) and simpler: it trusts the
// file, which must be undamaged.

/** A branch or leaf page in use, and the byte ranges (in the page) that a reader follows. */
export interface TreePage {
  pgno: number
  kind: 'branch' | 'leaf'
  /** [from, to): the page number, flags and bounds, each node offset, each node header, each overflow or database reference. */
  followed: Array<[number, number]>
  /** [from, to): the unused bytes between the node offsets and the nodes. */
  free: [number, number]
  /** [from, to): the bytes of each value held in the page (not on overflow pages), and its named database ('' outside one). */
  values: Array<{ db: string; range: [number, number] }>
}

const HEADER = 24
const F_BIGDATA = 0x01
const F_SUBDATA = 0x02

/** The page size, the meta LMDB opens (0, 1, or 0.5 for the flushed copy half a page into page 0), and the tree pages. */
export function lmdbTreePages(file: Buffer): { ps: number; meta: number; tree: TreePage[] } {
  const ps = file.readUInt32LE(HEADER + 24)
  const metas = [0, 0.5, 1].map((m) => ({ m, base: m * ps + HEADER }))
  const chosen = metas.reduce((a, b) => (file.readBigUInt64LE(b.base + 128) > file.readBigUInt64LE(a.base + 128) ? b : a))
  const roots: Array<{ pgno: bigint; main: boolean; db: string }> = [
    { pgno: file.readBigUInt64LE(chosen.base + 24 + 40), main: false, db: '' },
    { pgno: file.readBigUInt64LE(chosen.base + 72 + 40), main: true, db: '' },
  ]
  const tree: TreePage[] = []
  while (roots.length > 0) {
    const { pgno, main, db } = roots.pop()!
    if (pgno === 0xffff_ffff_ffff_ffffn) continue
    const p = file.subarray(Number(pgno) * ps, Number(pgno + 1n) * ps)
    const flags = p.readUInt16LE(18)
    const branch = (flags & 1) !== 0
    const followed: Array<[number, number]> = [
      [0, 8],
      [18, 24],
    ]
    const values: TreePage['values'] = []
    for (let i = 0; i < p.readUInt16LE(20) >> 1; i++) {
      const at = HEADER + p.readUInt16LE(HEADER + 2 * i)
      followed.push([HEADER + 2 * i, HEADER + 2 * i + 2], [at, at + 8])
      const nodeFlags = p.readUInt16LE(at + 4)
      const data = at + 8 + p.readUInt16LE(at + 6)
      if (branch) {
        roots.push({ pgno: BigInt(p.readUInt16LE(at)) | (BigInt(p.readUInt16LE(at + 2)) << 16n) | (BigInt(nodeFlags) << 32n), main, db })
      } else if (nodeFlags & F_BIGDATA) {
        followed.push([data, data + 24])
      } else if (nodeFlags & F_SUBDATA) {
        followed.push([data, data + 48])
        if (main) roots.push({ pgno: p.readBigUInt64LE(data + 40), main: false, db: p.toString('utf8', at + 8, data).replace(/\0+$/, '') })
      } else if (nodeFlags === 0) {
        values.push({ db, range: [data, data + (p.readUInt16LE(at) | (p.readUInt16LE(at + 2) << 16))] })
      }
    }
    const free: [number, number] = [HEADER + p.readUInt16LE(20), HEADER + p.readUInt16LE(22)]
    tree.push({ pgno: Number(pgno), kind: branch ? 'branch' : 'leaf', followed, free, values })
  }
  return { ps, meta: chosen.m, tree }
}
