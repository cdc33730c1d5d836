import { readdirSync, renameSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import hnsw from 'hnswlib-node'

const { HierarchicalNSW } = hnsw

export interface HnswParams { m: number; efConstruction: number; efSearch: number }
export const DEFAULT_HNSW: HnswParams = { m: 16, efConstruction: 200, efSearch: 96 }

/**
 * One tenant's HNSW index (cosine) — a cache of the vectors in LMDB. Saved as
 * `<key>.<labels>.bin`, where `labels` is how many labels (0…labels-1) it covers, written
 * to a temp file and renamed, so a file on disk is always whole and says how far it goes.
 */
export class TenantIndex {
  private capacity: number
  /** Labels 0…covered-1 have been added (or were deleted before they could be). */
  covered: number
  /** Changes since the last save. */
  dirty = 0
  private constructor(private readonly index: InstanceType<typeof HierarchicalNSW>, covered: number, private readonly params: HnswParams) {
    this.capacity = index.getMaxElements()
    this.covered = covered
    index.setEf(params.efSearch)
  }

  static create(dim: number, params: HnswParams = DEFAULT_HNSW, capacity = 1024): TenantIndex {
    const index = new HierarchicalNSW('cosine', dim)
    index.initIndex({ maxElements: capacity, m: params.m, efConstruction: params.efConstruction, randomSeed: 100 })
    return new TenantIndex(index, 0, params)
  }

  /** Loads the newest saved file for `key`, or returns null when there is none. */
  static load(dir: string, key: string, dim: number, params: HnswParams = DEFAULT_HNSW): TenantIndex | null {
    const saved = savedFiles(dir, key)
    const newest = saved[0]
    if (!newest) return null
    const index = new HierarchicalNSW('cosine', dim)
    index.readIndexSync(join(dir, newest.file))
    // readIndex resets ef to 10: set it again (done in the constructor).
    return new TenantIndex(index, newest.covered, params)
  }

  add(label: number, vector: readonly number[]): void {
    if (this.index.getCurrentCount() >= this.capacity) {
      this.capacity *= 2
      this.index.resizeIndex(this.capacity)
    }
    this.index.addPoint(vector as number[], label)
    if (label >= this.covered) this.covered = label + 1
    this.dirty++
  }

  remove(label: number): void {
    try {
      this.index.markDelete(label)
      this.dirty++
    } catch { /* not in the index (or already deleted) */ }
  }

  /** Nearest labels with cosine similarity, best first. */
  search(vector: readonly number[], k: number, filter?: (label: number) => boolean): Array<{ label: number; score: number }> {
    const n = this.index.getCurrentCount()
    if (n === 0) return []
    const want = Math.min(k, n)
    this.index.setEf(Math.max(this.params.efSearch, want))
    let res
    try {
      res = this.index.searchKnn(vector as number[], want, filter)
    } catch {
      // Fewer live points than asked for (deleted ones count in n): take what there is.
      res = this.index.searchKnn(vector as number[], Math.max(1, Math.floor(want / 2)), filter)
    }
    return res.neighbors.map((label, i) => ({ label, score: 1 - res.distances[i]! }))
  }

  save(dir: string, key: string): void {
    const file = `${key}.${this.covered}.bin`
    const tmp = join(dir, `${file}.${process.pid}.tmp`)
    this.index.writeIndexSync(tmp)
    renameSync(tmp, join(dir, file))
    for (const old of savedFiles(dir, key).slice(1)) rmSync(join(dir, old.file), { force: true })
    this.dirty = 0
  }
}

function savedFiles(dir: string, key: string): Array<{ file: string; covered: number }> {
  let names: string[]
  try { names = readdirSync(dir) } catch { return [] }
  return names
    .map((file) => ({ file, m: new RegExp(`^${key}\\.(\\d+)\\.bin$`).exec(file) }))
    .filter((x) => x.m)
    .map((x) => ({ file: x.file, covered: Number(x.m![1]) }))
    .sort((a, b) => b.covered - a.covered)
}

export function removeSavedIndexes(dir: string): void {
  let names: string[]
  try { names = readdirSync(dir) } catch { return }
  for (const f of names) if (f.endsWith('.bin') || f.endsWith('.tmp')) rmSync(join(dir, f), { force: true })
}
