import { rmSync } from 'node:fs'
import { join } from 'node:path'
import hnsw from 'hnswlib-node'
import { DamagedIndexError, inspectIndexFile } from './index-file.js'
import { installIndexFile, savedFiles, type IndexFileRecord, type PreparedIndexFile } from './index-dir.js'
import { DEFAULT_HNSW, type HnswParams } from './hnsw-params.js'

const { HierarchicalNSW } = hnsw

/**
 * One tenant's HNSW index (cosine) — a cache of the vectors in LMDB. Used inside the index
 * worker (see index-worker.ts): no hnswlib call runs on the main thread. Saved as
 * `<key>.<labels>.bin`, where `labels` is how many labels (0…labels-1) it covers, written
 * to a temp file, checked and renamed, so a file on disk says how far it goes.
 */
export class TenantIndex {
  private capacity: number
  /** The ef hnswlib was last given (set only when it changes: a native call per search otherwise). */
  private ef: number
  /** Labels 0…covered-1 have been added (or were deleted before they could be). */
  covered: number
  /** Changes since the last save. */
  dirty = 0
  private constructor(
    private readonly index: InstanceType<typeof HierarchicalNSW>,
    covered: number,
    private readonly params: HnswParams,
  ) {
    this.capacity = index.getMaxElements()
    this.covered = covered
    this.ef = params.efSearch
    index.setEf(params.efSearch)
  }

  static create(dim: number, params: HnswParams = DEFAULT_HNSW, capacity = 1024): TenantIndex {
    const index = new HierarchicalNSW('cosine', dim)
    index.initIndex({ maxElements: capacity, m: params.m, efConstruction: params.efConstruction, randomSeed: 100 })
    return new TenantIndex(index, 0, params)
  }

  /**
   * Loads the newest saved file for `key`, or returns null when there is none. The file is
   * checked before the native addon reads it (see inspectIndexFile): its labels must lie
   * below both the count in its name and `labelsBelow` (what LMDB has assigned), and when
   * the store recorded its last save, it must be that very file. Throws DamagedIndexError.
   */
  static load(
    dir: string,
    key: string,
    dim: number,
    opts: { labelsBelow: number; record?: IndexFileRecord | undefined; params?: HnswParams },
  ): TenantIndex | null {
    const newest = savedFiles(dir, key)[0]
    if (!newest) return null
    const path = join(dir, newest.file)
    if (newest.covered > opts.labelsBelow)
      throw new DamagedIndexError(path, `it claims ${newest.covered} labels, but only ${opts.labelsBelow} were ever assigned`)
    const facts = inspectIndexFile(path, { dim, labelsBelow: newest.covered })
    if (opts.record && (opts.record.file !== newest.file || opts.record.sha256 !== facts.sha256)) {
      throw new DamagedIndexError(path, `it is not the file last saved for this tenant (${opts.record.file})`)
    }
    // A fresh native object per attempt: after a failed read hnswlib-node keeps a dangling
    // pointer in the object, so one that failed is never used again.
    const index = new HierarchicalNSW('cosine', dim)
    try {
      index.readIndexSync(path)
    } catch (err) {
      throw new DamagedIndexError(path, `hnswlib could not read it (${(err as Error).message})`, { cause: err })
    }
    // readIndex resets ef to 10: set it again (done in the constructor).
    return new TenantIndex(index, newest.covered, opts.params ?? DEFAULT_HNSW)
  }

  add(label: number, vector: readonly number[]): void {
    if (this.index.getCurrentCount() >= this.capacity) {
      this.index.resizeIndex(this.capacity * 2)
      this.capacity *= 2
    }
    this.index.addPoint(vector as number[], label)
    if (label >= this.covered) this.covered = label + 1
    this.dirty++
  }

  /** The label's vector as the index holds it (normalised), or undefined when it is not in the index or deleted. */
  point(label: number): number[] | undefined {
    try {
      return this.index.getPoint(label)
    } catch {
      return undefined
    }
  }

  remove(label: number): void {
    try {
      this.index.markDelete(label)
      this.dirty++
    } catch {
      /* not in the index (or already deleted) */
    }
  }

  /** Nearest labels with cosine similarity, best first; `ef`: the search breadth (default `efSearch`; at least `k`). */
  search(
    vector: readonly number[],
    k: number,
    filter?: (label: number) => boolean,
    ef = this.params.efSearch,
  ): Array<{ label: number; score: number }> {
    const n = this.index.getCurrentCount()
    if (n === 0) return []
    const want = Math.min(k, n)
    const breadth = Math.max(ef, want)
    if (breadth !== this.ef) {
      this.index.setEf(breadth)
      this.ef = breadth
    }
    let res
    try {
      res = this.index.searchKnn(vector as number[], want, filter)
    } catch {
      // Fewer live points than asked for (deleted ones count in n): take what there is.
      res = this.index.searchKnn(vector as number[], Math.max(1, Math.floor(want / 2)), filter)
    }
    return res.neighbors.map((label, i) => ({ label, score: 1 - res.distances[i]! }))
  }

  /**
   * Writes the index to a temp file in `dir` and checks it: hnswlib ignores write errors,
   * so a full disk leaves a short file that only the check notices. Throws (the temp file
   * removed) when the file is not whole; else {@link install} puts it in place.
   */
  write(dir: string, key: string): PreparedIndexFile {
    const covered = this.covered
    const file = `${key}.${covered}.bin`
    const tmp = join(dir, `${file}.${process.pid}.tmp`)
    try {
      this.index.writeIndexSync(tmp)
      const facts = inspectIndexFile(tmp, { dim: this.index.getNumDimensions(), labelsBelow: covered })
      return { tmp, file, covered, sha256: facts.sha256 }
    } catch (err) {
      rmSync(tmp, { force: true })
      const reason = err instanceof DamagedIndexError ? `${err.reason} (disk full?)` : (err as Error).message
      throw new Error(`writing the memory index file ${file} failed: ${reason}`, { cause: err })
    }
  }

  /** Renames a prepared file into place and removes the key's older files. */
  static install(dir: string, key: string, prepared: PreparedIndexFile): void {
    installIndexFile(dir, key, prepared)
  }
}
