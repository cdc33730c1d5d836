import { randomUUID } from 'node:crypto'
import { BurrowError } from '../core/errors.js'
import type { Logger } from '../core/logger.js'
import { SILENT_LOGGER } from '../core/logger.js'
import type { LogBatch, MemoryLog } from '../core/memory-log.js'
import type { IdempotencyStore } from '../core/stores.js'
import {
  matchesMetadata,
  type MemoryAddOutcome,
  type MemoryEntry,
  type MemoryHit,
  type MemoryListQuery,
  type MemoryPage,
  type MemoryQuery,
  type MemoryStore,
  type NewMemoryEntry,
} from '../core/memory-store.js'
import { decodeMemoryCursor, memoryPage } from './memory-cursor.js'
import { MemoryCore, type MemoryCoreOptions, type PreparedEntry } from './memory-core.js'
import { publicEntry } from './memory-db.js'
import { encodeBlock } from './posting-blocks.js'
import { applyChanges, copiedHead, openLocalCopy } from './replica-copy.js'
import { KeyedSerial } from '../core/keyed-serial.js'

export interface ReplicatedMemoryOptions extends MemoryCoreOptions {
  /** The shared truth (PostgreSQL). The store owns it: closing the store closes it. */
  log: MemoryLog
  /** How often the database's per-tenant counters are polled (default 200 ms). */
  pollMs?: number
}

/** A search on a tenant not checked against the database for this long first catches up (or fails: the database is gone). */
const STALE_MS = 2_000
/** Entries read at a time when a metadata filter pages through them. */
const LIST_BATCH = 200
/** How often old deletions are forgotten (MemoryLog `pruneDeletions`; every replica runs it, at start and then hourly). */
const PRUNE_EVERY_MS = 3_600_000

/**
 * Semantic memory shared by replicas: the entries, their keyword postings and their deletions are
 * in a MemoryLog (PostgreSQL); each replica keeps a local copy — an LMDB environment of the
 * embedded layout in its data directory, its keyword statistics in memory and its HNSW index in
 * the index worker (MemoryCore, the same code and ranking as HnswMemoryStore) — fed from the
 * database: a replica applies its own adds and deletions right after their commit, and polls the
 * tenants' counters (`pollMs`) for the others', so what another replica commits is searchable here
 * within about `pollMs`. A search on a tenant the poll has not confirmed for STALE_MS catches up
 * first, so a database outage answers STORE_UNAVAILABLE rather than stale results; reads by id,
 * lists and counts go to the database. Vectors stay derived: each replica embeds what others added.
 */
export class ReplicatedMemoryStore implements MemoryStore {
  /** Tenants in use here, with when the database last confirmed the local copy is current. */
  private readonly confirmed = new Map<string, number>()
  /** Per tenant, the catch-up under way (they run one at a time). */
  /** One catch-up at a time per tenant. */
  private readonly perTenant = new KeyedSerial()
  private readonly timer: NodeJS.Timeout
  private readonly pruneTimer: NodeJS.Timeout
  private polling: Promise<void> | undefined
  private pruning: Promise<void> | undefined
  private closing = false
  private pollFailed = false
  private readonly logger: Logger

  private constructor(
    private readonly core: MemoryCore,
    private readonly log: MemoryLog,
    opts: ReplicatedMemoryOptions,
  ) {
    this.logger = opts.logger ?? SILENT_LOGGER
    this.timer = setInterval(() => {
      this.polling ??= this.poll().finally(() => (this.polling = undefined))
    }, opts.pollMs ?? 200)
    this.timer.unref()
    this.pruneTimer = setInterval(() => this.prune(), PRUNE_EVERY_MS)
    this.pruneTimer.unref()
  }

  static async open(opts: ReplicatedMemoryOptions): Promise<ReplicatedMemoryStore> {
    const { db, discarded } = await openLocalCopy(opts.dataDir, opts.log)
    if (discarded) opts.logger?.warn({ dir: opts.dataDir }, 'the local copy of memory was not made from this database: made again from it')
    let core: MemoryCore | undefined
    try {
      core = new MemoryCore(db, opts)
      await core.checkEmbedder()
      const store = new ReplicatedMemoryStore(core, opts.log, opts)
      store.prune()
      return store
    } catch (err) {
      await core?.cache.close().catch(() => undefined)
      await db.root.close().catch(() => undefined)
      throw err
    }
  }

  /** Where idempotent adds' outcomes are kept: the log's, written in the transaction of their entries. */
  get idempotency(): IdempotencyStore | undefined {
    return this.log.idempotency
  }

  async add(entries: readonly NewMemoryEntry[], outcome?: MemoryAddOutcome): Promise<MemoryEntry[]> {
    if (entries.length === 0) return []
    this.core.assertOpen()
    const prepared = await this.core.prepare(entries, randomUUID)
    const added = prepared.map((p) => publicEntry(p.entry))
    const byTenant = new Map<string, PreparedEntry[]>()
    for (const p of prepared) {
      const list = byTenant.get(p.entry.tenant)
      if (list) list.push(p)
      else byTenant.set(p.entry.tenant, [p])
    }
    const groups = [...byTenant.values()]
    const batches: LogBatch[] = groups.map((ps) => ({
      tenant: ps[0]!.entry.tenant,
      entries: ps.map((p) => ({ entry: publicEntry(p.entry), len: p.entry.len })),
      // Encoded from label 0: with consecutive labels the bytes are the same from any first label.
      postings: encodeBlock(
        0,
        ps.map((p, i) => ({ label: i, tf: p.tf })),
      ),
    }))
    const committed = await this.log.append(batches, this.log.idempotency && outcome ? () => outcome(added) : undefined)
    if ('deletedSession' in committed)
      throw new BurrowError('SESSION_NOT_FOUND', `Session ${committed.deletedSession} was deleted; its memories are not kept.`)
    // Committed: acknowledged. Nothing below may fail the call (a retry would add the entries twice).
    await Promise.all(
      groups.map((ps, i) => {
        const vectors = new Map<number, number[]>()
        ps.forEach((p, j) => {
          p.label = committed.first[i]! + j
          if (p.vector) vectors.set(p.label, p.vector)
        })
        return this.catchUp(ps[0]!.entry.tenant, vectors).catch((err: unknown) =>
          this.logger.warn({ err }, 'memory entries committed, but the local copy could not follow yet: the next poll brings them'),
        )
      }),
    )
    return added
  }

  async search(q: MemoryQuery): Promise<MemoryHit[]> {
    const at = this.confirmed.get(q.tenant)
    if (at === undefined || Date.now() - at > STALE_MS) await this.catchUp(q.tenant)
    return this.core.search(q)
  }

  async deleteSession(tenant: string, sessionId: string): Promise<number> {
    this.core.assertOpen()
    const labels = await this.log.remove(tenant, { sessionId })
    await this.followQuietly(tenant)
    return labels.length
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    this.core.assertOpen()
    const labels = await this.log.remove(tenant, { id })
    if (labels.length > 0) await this.followQuietly(tenant)
    return labels.length > 0
  }

  async get(tenant: string, id: string): Promise<MemoryEntry | null> {
    return (await this.log.entry(tenant, id))?.entry ?? null
  }

  async list(tenant: string, q: MemoryListQuery): Promise<MemoryPage> {
    const out: Array<{ label: number; entry: MemoryEntry }> = []
    const filtered = q.metadata !== undefined && Object.keys(q.metadata).length > 0
    const batch = filtered ? Math.max(LIST_BATCH, q.limit + 1) : q.limit + 1
    for (let after = decodeMemoryCursor(q.cursor); ;) {
      const rows = await this.log.entries(tenant, { after, limit: batch, sessionId: q.sessionId })
      for (const r of rows) {
        if (out.length > q.limit) break
        if (matchesMetadata(r.entry.metadata, q.metadata)) out.push({ label: r.label, entry: r.entry })
      }
      if (out.length > q.limit || rows.length < batch) break
      after = rows[rows.length - 1]!.label
    }
    return memoryPage(out, q.limit)
  }

  count(tenant: string): Promise<number> {
    return this.log.count(tenant)
  }

  /** False while the database cannot be reached or written, or the local copy cannot be written. */
  healthy(): boolean {
    return !this.core.closed && this.log.healthy() && this.core.healthy()
  }

  /** Entries in the local copy not yet in their tenant's HNSW index (of the tenants loaded). */
  indexBacklog(): number {
    return this.core.cache.backlog()
  }

  /** Labels the tenant's local HNSW index covers (0 while it loads). */
  indexCovered(tenant: string): number {
    return this.core.cache.covered(tenant)
  }

  async close(): Promise<void> {
    if (this.closing) return
    this.closing = true
    clearInterval(this.timer)
    clearInterval(this.pruneTimer)
    await Promise.all([this.polling, this.pruning])
    await this.perTenant.idle()
    await this.core.close()
    await this.log.close()
  }

  /** Brings the tenant's local copy up to the database (one catch-up at a time per tenant); rejects with STORE_UNAVAILABLE. */
  private catchUp(tenant: string, vectors?: ReadonlyMap<number, number[]>): Promise<void> {
    const started = Date.now()
    return this.perTenant.run(tenant, async () => {
      if (this.closing) return
      const since = copiedHead(this.core.db, tenant)
      const changes = await this.log.changes(tenant, since)
      if (changes.incarnation !== '' && since.incarnation !== '' && changes.incarnation !== since.incarnation) {
        // Only a database recreated under a running replica does this; its next start makes the copy again.
        throw new BurrowError('STORE_UNAVAILABLE', `The memory database no longer holds the history this replica copied for its tenant.`)
      }
      if (changes.forgotten)
        this.logger.warn(
          { tenant, gone: changes.removed.length },
          'deletions this copy had not replayed were forgotten by the database: its copy of the tenant was compared with the database',
        )
      await applyChanges(this.core, tenant, changes, vectors)
      this.confirmed.set(tenant, started)
    })
  }

  /** After a committed deletion: the local copy follows now, or the next poll makes it. */
  private followQuietly(tenant: string): Promise<void> {
    return this.catchUp(tenant).catch((err: unknown) =>
      this.logger.warn({ err }, 'a memory deletion is committed, but the local copy could not follow yet: the next poll does'),
    )
  }

  /** Forgets old deletions in the background (one run at a time); a failure is logged and the next run tries again. */
  private prune(): void {
    if (this.closing) return
    this.pruning ??= this.log
      .pruneDeletions()
      .then(
        (n) => {
          if (n > 0) this.logger.info({ deletions: n }, 'forgot memory deletions past their retention')
        },
        (err: unknown) => this.logger.warn({ err }, 'forgetting old memory deletions failed: the next run tries again'),
      )
      .finally(() => (this.pruning = undefined))
  }

  /** One read of the counters of every tenant in use; the tenants whose counters moved catch up. Never rejects. */
  private async poll(): Promise<void> {
    if (this.confirmed.size === 0 || this.closing) return
    const started = Date.now()
    try {
      const tenants = [...this.confirmed.keys()]
      const heads = await this.log.heads(tenants)
      const moving: Array<Promise<void>> = []
      for (const tenant of tenants) {
        const mine = copiedHead(this.core.db, tenant)
        const theirs = heads.get(tenant)
        const same = theirs
          ? theirs.next === mine.next && theirs.deletions === mine.deletions && theirs.incarnation === mine.incarnation
          : mine.next === 0
        if (same) this.confirmed.set(tenant, started)
        else moving.push(this.catchUp(tenant))
      }
      await Promise.all(moving)
      if (this.pollFailed) this.logger.info({}, 'the memory database answers again: changes of other replicas flow again')
      this.pollFailed = false
    } catch (err) {
      if (!this.pollFailed)
        this.logger.warn({ err }, 'polling the memory database failed: searches answer STORE_UNAVAILABLE once their copy is stale')
      this.pollFailed = true
    }
  }
}
