import { randomUUID } from 'node:crypto'
import { BurrowError } from '../core/errors.js'
import type { WriteHealth } from '../core/write-health.js'
import { SILENT_LOGGER } from '../core/logger.js'
import type {
  MemoryAddOutcome,
  MemoryEntry,
  MemoryHit,
  MemoryListQuery,
  MemoryPage,
  MemoryQuery,
  MemoryStore,
  NewMemoryEntry,
} from '../core/memory-store.js'
import { MemoryAddOutcomes } from './memory-outcomes.js'
import type { KeywordIndex } from './keyword-index.js'
import { publicEntry, type MemoryDb } from './memory-db.js'
import { openUpgraded } from './memory-upgrade.js'
import { encodeBlock } from './posting-blocks.js'
import { dropPostings, removeLabel } from './memory-removal.js'
import { ENTRIES, MemoryCore, type MemoryCoreOptions } from './memory-core.js'

export interface HnswMemoryOptions extends MemoryCoreOptions {
  durability: 'fsync' | 'relaxed'
  /** How long the outcomes of idempotent adds are kept (default 24 hours). */
  idempotencyTtlMs?: number
}

/**
 * Semantic memory on LMDB + hnswlib. LMDB holds the truth (entries and their keyword
 * postings, in blocks); vectors are derived from the content, and each tenant's HNSW index
 * is a cache (see TenantIndexCache), held by a worker thread: filled in the background after `add()` acknowledges,
 * saved as it grows and at close, checked before it is loaded, rebuilt from LMDB when
 * damaged, and completed by an exact scan of whatever it does not cover yet — so nothing
 * acknowledged is lost to a crash and no state of the index file fails a request. Every
 * tenant has its own index: no query can reach another tenant's vectors.
 *
 * Writes are observed: one that cannot be made durable (disk full, I/O error) throws
 * `STORE_UNAVAILABLE` and leaves nothing half-done, reads go on working, and writes work
 * again once the disk does. An `add()` whose entries are committed always succeeds.
 */
export class HnswMemoryStore implements MemoryStore {
  private readonly db: MemoryDb
  private readonly writes: WriteHealth
  readonly idempotency: MemoryAddOutcomes

  private constructor(
    private readonly core: MemoryCore,
    idempotencyTtlMs: number,
  ) {
    this.db = core.db
    this.writes = core.writes
    this.idempotency = new MemoryAddOutcomes(core.db.idempotency, idempotencyTtlMs, core.writes)
  }

  static async open(opts: HnswMemoryOptions): Promise<HnswMemoryStore> {
    const db = await openUpgraded(opts.dataDir, opts.durability, opts.logger ?? SILENT_LOGGER)
    let core: MemoryCore | undefined
    try {
      core = new MemoryCore(db, opts)
      await core.checkEmbedder()
      const store = new HnswMemoryStore(core, opts.idempotencyTtlMs ?? 24 * 3600 * 1000)
      await store.idempotency.sweep()
      return store
    } catch (err) {
      await core?.cache.close().catch(() => undefined)
      await db.root.close().catch(() => undefined)
      throw err
    }
  }

  async add(entries: readonly NewMemoryEntry[], outcome?: MemoryAddOutcome): Promise<MemoryEntry[]> {
    if (entries.length === 0) return []
    this.core.assertOpen()
    const prepared = await this.core.prepare(entries, randomUUID)
    const added = prepared.map((p) => publicEntry(p.entry))
    const tenants = new Set(entries.map((e) => e.tenant))
    // Loaded before the commit, so the index's state (saved file, missing, damaged) is judged
    // against LMDB as it was; everything committed below is inserted after.
    for (const tenant of tenants) this.core.cache.open(tenant)
    const deleted = await this.writes.run(
      () =>
        this.db.entries.childTransaction(() => {
          // Checked in the transaction that would write: a deletion is either before it (and
          // nothing is added) or after it (and removes these entries too).
          const gone = prepared.find(
            (p) => p.entry.session_id && this.db.deletedSessions.get([p.entry.tenant, p.entry.session_id]) !== undefined,
          )
          if (gone) return gone.entry.session_id
          const blocks = new Map<string, Array<{ label: number; tf: Map<string, number> }>>()
          for (const p of prepared) {
            const tenant = p.entry.tenant
            const stats = this.db.stats.get(tenant) ?? { docs: 0, totalLength: 0, next: 0 }
            const label = stats.next
            p.label = label
            this.db.stats.put(tenant, { docs: stats.docs + 1, totalLength: stats.totalLength + p.entry.len, next: label + 1 })
            this.db.entries.put([tenant, label], p.entry)
            this.db.ids.put(p.entry.id, [tenant, label])
            if (p.entry.session_id) this.db.bySession.put([tenant, p.entry.session_id, label], 1)
            let block = blocks.get(tenant)
            if (!block) blocks.set(tenant, (block = []))
            block.push({ label, tf: p.tf })
          }
          // One posting block per tenant: this call's labels of a tenant are consecutive.
          for (const [tenant, docs] of blocks) this.db.blocks.put([tenant, docs[0]!.label], encodeBlock(docs[0]!.label, docs))
          // Sealed here, once nothing refuses the add: an outcome exists only where its entries do.
          const record = outcome?.(added)
          if (record) this.idempotency.writeIn(record)
          return null
        }),
      ENTRIES,
    )
    if (deleted) throw new BurrowError('SESSION_NOT_FOUND', `Session ${deleted} was deleted; its memories are not kept.`)
    // Committed (with fsync durability: on disk): acknowledged. Nothing below may fail the
    // call — a retry would add the entries twice. The vectors wait in memory, found by an
    // exact scan, while the HNSW index takes them in the background.
    this.core.added(prepared)
    return added
  }

  search(q: MemoryQuery): Promise<MemoryHit[]> {
    return this.core.search(q)
  }

  /** The tenant's keyword index: in memory, else built from its posting blocks in LMDB. */
  keywordIndex(tenant: string): KeywordIndex {
    return this.core.keywordIndex(tenant)
  }

  async deleteSession(tenant: string, sessionId: string): Promise<number> {
    this.core.assertOpen()
    const removed: Array<{ label: number; terms: Set<string> }> = []
    const labels = await this.writes.run(
      () =>
        this.db.entries.childTransaction(() => {
          removed.length = 0
          const out: number[] = []
          const stats = this.db.stats.get(tenant) ?? { docs: 0, totalLength: 0, next: 0 }
          for (const key of this.db.bySession.getKeys({ start: [tenant, sessionId, 0], end: [tenant, sessionId, Infinity] })) {
            const label = key[2] as number
            const terms = removeLabel(this.db, tenant, label, stats)
            if (terms) removed.push({ label, terms })
            this.db.bySession.remove(key)
            out.push(key[2] as number)
          }
          dropPostings(this.db, tenant, out)
          // Session ids are never reused: the mark keeps late writes (a queued indexing batch,
          // an add racing the deletion) from bringing the session's memories back.
          this.db.deletedSessions.put([tenant, sessionId], Date.now())
          if (out.length > 0) this.db.stats.put(tenant, stats)
          return out
        }),
      ENTRIES,
    )
    this.core.removed(tenant, removed, labels)
    return labels.length
  }

  async get(tenant: string, id: string): Promise<MemoryEntry | null> {
    return this.core.get(tenant, id)
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    this.core.assertOpen()
    let terms: Set<string> | undefined
    const label = await this.writes.run(
      () =>
        this.db.entries.childTransaction(() => {
          const l = this.core.labelOf(tenant, id)
          if (l === undefined || this.db.entries.get([tenant, l]) === undefined) return undefined
          const stats = this.db.stats.get(tenant) ?? { docs: 0, totalLength: 0, next: 0 }
          terms = removeLabel(this.db, tenant, l, stats)
          dropPostings(this.db, tenant, [l])
          this.db.stats.put(tenant, stats)
          return l
        }),
      ENTRIES,
    )
    if (label === undefined) return false
    // The keyword index follows the commit, as for adds; one that cannot is rebuilt from LMDB when next used.
    this.core.removed(tenant, [{ label, terms }], [label])
    return true
  }

  async list(tenant: string, q: MemoryListQuery): Promise<MemoryPage> {
    return this.core.list(tenant, q)
  }

  async count(tenant: string): Promise<number> {
    return this.core.count(tenant)
  }

  /**
   * False after a write failed (disk full, I/O error), true again once one succeeds; reads
   * work either way. While false, asking starts an occasional probe write (see core/write-health.ts).
   */
  healthy(): boolean {
    return this.core.healthy()
  }

  /** Entries acknowledged but not yet in their tenant's HNSW index (of the tenants loaded). */
  indexBacklog(): number {
    return this.core.cache.backlog()
  }

  /** Saves every index with unsaved changes (failures are logged: LMDB has every entry). */
  async save(): Promise<void> {
    await this.core.cache.saveAll()
  }

  close(): Promise<void> {
    return this.core.close()
  }

  /** Throws the tenant's index away and builds it again from the entries in LMDB, embedding them again (for measurements). */
  rebuildIndex(tenant: string): Promise<void> {
    return this.core.cache.rebuildNow(tenant)
  }

  /**
   * Labels the tenant's HNSW index covers (0 while it loads), asking the index worker for it —
   * its checked saved file, else a fresh one filled from LMDB — when it does not hold it yet.
   */
  indexCovered(tenant: string): number {
    return this.core.cache.covered(tenant)
  }

  /** Vector searches answered through the search lane so far (search-lane.ts; the rest went by message). */
  laneAnswers(): number {
    return this.core.cache.client.laneAnswers
  }

  /** Stops the index worker as a crash would (for tests): logged, started again, indexes reopened; no call fails. */
  crashIndexWorker(): Promise<void> {
    return this.core.cache.crashWorker()
  }
}
