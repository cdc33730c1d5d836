import { createHash } from 'node:crypto'
import { rmSync } from 'node:fs'
import type { Logger } from '../core/logger.js'
import type { WriteHealth } from '../core/write-health.js'
import { TenantIndex, type IndexFileRecord } from './hnsw-index.js'
import type { MemoryDb } from './memory-db.js'

export interface IndexSavesOptions {
  /** `<dataDir>/memory/hnsw` */
  dir: string
  /** Save once the changes since the last save reach `saveGrowth` × the index's size, and at least `saveEvery`. */
  saveEvery: number
  saveGrowth: number
  logger: Logger
}

/**
 * When and how the tenants' HNSW indexes are written to their files. A save never fails an
 * operation: a failed one is logged and tried again after as many changes again. Each save is
 * recorded in LMDB (file name and sha256), so a file that does not match its record is not loaded.
 */
export class IndexSaves {
  private readonly saving = new Map<string, Promise<void>>()
  private readonly scheduled = new Set<string>()
  /** After a failed save: the change count at which to try again. */
  private readonly saveAt = new Map<string, number>()
  closing = false

  constructor(
    private readonly indexes: Map<string, TenantIndex>,
    private readonly db: MemoryDb,
    private readonly writes: WriteHealth,
    private readonly opts: IndexSavesOptions,
  ) {}

  /** Schedules a save when the index has changed enough since the last one. */
  ifDue(tenant: string, index: TenantIndex): void {
    if (index.dirty >= (this.saveAt.get(tenant) ?? this.threshold(index))) this.schedule(tenant)
  }

  /**
   * On a later turn of the event loop: by then every deletion whose commit has resolved has
   * also been applied to the index, so the tombstones the save clears are all in the file.
   */
  schedule(tenant: string): void {
    if (this.scheduled.has(tenant)) return
    this.scheduled.add(tenant)
    setImmediate(() => {
      this.scheduled.delete(tenant)
      if (!this.closing) void this.save(tenant)
    })
  }

  /** One save per tenant at a time; never rejects. */
  save(tenant: string): Promise<void> {
    const running = this.saving.get(tenant)
    if (running) return running
    const done = this.writeFile(tenant)
      .catch((err: unknown) => this.failed(tenant, err))
      .finally(() => this.saving.delete(tenant))
    this.saving.set(tenant, done)
    return done
  }

  /**
   * Writes and checks the file, records it (with the tombstones it makes obsolete cleared)
   * in one LMDB transaction, then renames it into place. A failure at any step leaves the
   * previous file and its record as they were.
   */
  private async writeFile(tenant: string): Promise<void> {
    const index = this.indexes.get(tenant)
    if (!index) return
    const key = tenantKey(tenant)
    const tombstones = [...this.db.tombstones.getKeys({ start: [tenant, 0], end: [tenant, Infinity] })]
    const changes = index.dirty
    const prepared = index.write(this.opts.dir, key)
    try {
      await this.writes.run(
        () =>
          this.db.meta.transaction(() => {
            this.db.meta.put(recordKey(key), { file: prepared.file, sha256: prepared.sha256 } satisfies IndexFileRecord)
            for (const t of tombstones) this.db.tombstones.remove(t)
          }),
        'the memory index record',
      )
      TenantIndex.install(this.opts.dir, key, prepared)
    } catch (err) {
      rmSync(prepared.tmp, { force: true })
      throw err
    }
    index.dirty = Math.max(0, index.dirty - changes)
    this.saveAt.delete(tenant)
  }

  /** Changes after which an index is saved: a share of its size, so saving costs O(size) bytes per O(size) changes. */
  private threshold(index: TenantIndex): number {
    return Math.max(this.opts.saveEvery, Math.ceil(this.opts.saveGrowth * index.covered))
  }

  private failed(tenant: string, err: unknown): void {
    const index = this.indexes.get(tenant)
    if (index) this.saveAt.set(tenant, index.dirty + this.threshold(index))
    this.opts.logger.warn(
      { err, tenant_key: tenantKey(tenant) },
      'saving a memory index failed; it is saved again later (LMDB has every entry)',
    )
  }

  /** Every save under way. */
  running(): Promise<unknown> {
    return Promise.all(this.saving.values())
  }

  /** Writes the tenant's file now (at close); a failure is logged. */
  writeNow(tenant: string): Promise<void> {
    return this.writeFile(tenant).catch((err: unknown) => this.failed(tenant, err))
  }
}

/** The tenant's name in file names and logs: a tenant may be any string, and is not for logs. */
export function tenantKey(tenant: string): string {
  return createHash('sha256').update(tenant).digest('hex').slice(0, 24)
}

/** meta key of a tenant's index file record; every one starts with this prefix. */
export const RECORD_PREFIX = 'hnsw_file:'
export const recordKey = (key: string) => `${RECORD_PREFIX}${key}`
