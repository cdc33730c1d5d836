import { createHash } from 'node:crypto'
import { rmSync } from 'node:fs'
import type { Logger } from '../core/logger.js'
import type { WriteHealth } from '../core/write-health.js'
import { installIndexFile, type IndexFileRecord } from './index-dir.js'
import type { WriteReply } from './index-worker-protocol.js'
import type { MemoryDb } from './memory-db.js'

export interface IndexSavesOptions {
  /** `<dataDir>/memory/hnsw` */
  dir: string
  /** Save once the changes since the last save reach `saveGrowth` × the index's size, and at least `saveEvery`. */
  saveEvery: number
  saveGrowth: number
  logger: Logger
}

/** The indexes as the saves see them (TenantIndexCache: the worker holds them). */
export interface SavableIndexes {
  /** Unsaved changes of the tenant's index and the labels it covers; undefined when it is not loaded. */
  state(tenant: string): { dirty: number; covered: number } | undefined
  /** Writes the index to a checked temp file (in the index worker). */
  write(tenant: string): Promise<WriteReply>
  /** A written file was recorded and installed: its `changes` no longer count. */
  saved(tenant: string, written: WriteReply): void
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
    private readonly indexes: SavableIndexes,
    private readonly db: MemoryDb,
    private readonly writes: WriteHealth,
    private readonly opts: IndexSavesOptions,
  ) {}

  /** Schedules a save when the index has changed enough since the last one. */
  ifDue(tenant: string): void {
    const index = this.indexes.state(tenant)
    if (index && index.dirty > 0 && index.dirty >= (this.saveAt.get(tenant) ?? this.threshold(index))) this.schedule(tenant)
  }

  /**
   * On a later turn of the event loop: by then every deletion whose commit has resolved has
   * also been sent to the worker — before the write, so the tombstones the save clears are all
   * in the file (the worker takes messages in order).
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
    if (!this.indexes.state(tenant)) return
    const key = tenantKey(tenant)
    // Read before the write is asked for: the deletions they stand for were sent to the worker before it.
    const tombstones = [...this.db.tombstones.getKeys({ start: [tenant, 0], end: [tenant, Infinity] })]
    const prepared = await this.indexes.write(tenant)
    try {
      await this.writes.run(
        () =>
          this.db.meta.transaction(() => {
            this.db.meta.put(recordKey(key), { file: prepared.file, sha256: prepared.sha256 } satisfies IndexFileRecord)
            for (const t of tombstones) this.db.tombstones.remove(t)
          }),
        'the memory index record',
      )
      installIndexFile(this.opts.dir, key, prepared)
    } catch (err) {
      rmSync(prepared.tmp, { force: true })
      throw err
    }
    this.indexes.saved(tenant, prepared)
    this.saveAt.delete(tenant)
  }

  /** Changes after which an index is saved: a share of its size, so saving costs O(size) bytes per O(size) changes. */
  private threshold(index: { covered: number }): number {
    return Math.max(this.opts.saveEvery, Math.ceil(this.opts.saveGrowth * index.covered))
  }

  private failed(tenant: string, err: unknown): void {
    const index = this.indexes.state(tenant)
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
