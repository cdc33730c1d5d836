import type { Logger } from '../core/logger.js'
import type { WriteHealth } from '../core/write-health.js'
import type { Embedder } from '../core/memory-store.js'
import type { HnswParams } from './hnsw-params.js'
import type { IndexFileRecord } from './index-dir.js'
import { IndexFeed } from './index-feed.js'
import { IndexWorkerClient } from './index-worker-client.js'
import type { OpenReply, WorkerEvent, WriteReply } from './index-worker-protocol.js'
import type { MemoryDb } from './memory-db.js'
import { IndexSaves, recordKey, tenantKey } from './index-saves.js'
import { nextReport, wake, type TenantState } from './tenant-index-state.js'
import { VectorSearch } from './vector-search.js'
import { VectorTail } from './vector-tail.js'

export { RECORD_PREFIX, tenantKey } from './index-saves.js'

export interface TenantIndexCacheOptions {
  /** `<dataDir>/memory/hnsw` */
  dir: string
  dim: number
  params: HnswParams
  /** Makes the vectors of entries that have none in memory (after a restart, a rebuild, an embedder change). */
  embedder: Embedder
  /**
   * Save a tenant's index once its changes since the last save reach `saveGrowth` × its
   * size, and at least `saveEvery` (and at close): the bytes written stay proportional to
   * the index's size, not to its size × adds.
   */
  saveEvery: number
  saveGrowth: number
  logger: Logger
}

/** At close, time the worker spends inserting what waits in memory before the last save (a shutdown should not wait on a long backlog). */
const CLOSE_BUDGET_MS = 2_000

/**
 * The tenants' HNSW indexes, kept behind LMDB (the truth) without ever failing a caller. The
 * indexes live in one worker thread (IndexWorkerClient, index-host.ts): inserts, loads, saves
 * and the searches themselves never run on the event loop. Vectors are derived data: LMDB
 * keeps the entries' content, not their vectors.
 *
 * - Labels below an index's `covered` (as the worker acknowledged it) are in it (or deleted);
 *   labels at or above it wait in memory (the tail) and searches (VectorSearch) find them by an exact
 *   scan while they are streamed to the worker, in label order, which inserts them a slice at a
 *   time and reports how far it got. `add()` hands its vectors over after the commit and
 *   returns: acknowledging does not wait for the index.
 * - Entries whose vectors are not in memory — the unsaved part after a restart or crash, a
 *   rebuild, an embedder change, a worker that stopped — are embedded again from their
 *   content, in the background; until then a search scores those among its keyword
 *   candidates by embedding them on the spot (VectorSearch.complete).
 * - A missing or damaged file, or an insert or search that throws, gives the tenant a fresh
 *   index that is filled from LMDB the same way (a rebuild), with one warning in the log;
 *   the fresh file is saved once it is complete. A worker that stops is logged and started
 *   again, and every index it held is opened again (file, else rebuild).
 * - An index is saved when its changes since the last save reach a share of its size, and at
 *   close (see IndexSaves). Saving never fails an operation.
 */
export class TenantIndexCache {
  private readonly states = new Map<string, TenantState>()
  /** Tenant by key (the worker names tenants by key). */
  private readonly tenantOf = new Map<string, string>()
  private readonly tail = new VectorTail()
  readonly client: IndexWorkerClient
  private readonly saves: IndexSaves
  private readonly feed: IndexFeed
  /** The vector side of searches (nearest, scoreLabels, complete). */
  readonly search: VectorSearch
  private epochs = 0
  private closing = false

  constructor(
    private readonly db: MemoryDb,
    writes: WriteHealth,
    private readonly opts: TenantIndexCacheOptions,
  ) {
    this.client = new IndexWorkerClient(
      { dir: opts.dir, dim: opts.dim, params: opts.params },
      {
        event: (m) => this.onEvent(m),
        stopped: () => {
          for (const st of this.states.values()) wake(st)
        },
        restarted: () => this.reopenAll(),
      },
      opts.logger,
    )
    this.saves = new IndexSaves(
      {
        state: (tenant) => {
          const st = this.states.get(tenant)
          return st?.loaded ? st : undefined
        },
        write: (tenant) => this.write(tenant),
        saved: (tenant, written) => this.saved(tenant, written),
      },
      db,
      writes,
      opts,
    )
    this.feed = new IndexFeed({
      db,
      tail: this.tail,
      client: this.client,
      embedder: opts.embedder,
      dim: opts.dim,
      logger: opts.logger,
      state: (tenant) => this.states.get(tenant),
      closing: () => this.closing,
      ended: () => this.client.setBusy(this.inFlight()),
    })
    this.search = new VectorSearch({
      db,
      tail: this.tail,
      client: this.client,
      embedder: opts.embedder,
      dim: opts.dim,
      open: (tenant) => this.open(tenant),
      loaded: (tenant) => this.loaded(tenant),
      searched: (tenant, st) => {
        if (st.covered < this.next(tenant)) void this.feed.catchUp(tenant)
      },
      broken: (tenant, err) => this.replace(tenant, err, 'searching a memory index failed: rebuilding it from LMDB'),
    })
  }

  /**
   * Asks the worker for the tenant's index unless it has it: its saved file (checked before
   * hnswlib reads it) with the deletions recorded since, else — missing or damaged — a fresh
   * index filled from LMDB. The file is judged against LMDB as it is now (what `add()` relies
   * on, opening before its commit). Labels the index does not cover are added in the background.
   */
  open(tenant: string): TenantState {
    return this.states.get(tenant) ?? this.request(tenant, false)
  }

  /** Labels the tenant's index has acknowledged (0 while it loads). */
  covered(tenant: string): number {
    return this.open(tenant).covered
  }

  /**
   * Committed entries' vectors, handed over after the commit: searchable at once (exact scan),
   * inserted into the index in the background. Returns at once.
   */
  added(tenant: string, vectors: ReadonlyArray<{ label: number; vector: number[] }>): void {
    const st = this.open(tenant)
    for (const { label, vector } of vectors) if (label >= st.covered) this.tail.set(tenant, label, this.feed.checked(vector))
    st.stalled = false
    void this.feed.catchUp(tenant)
  }

  /** Labels just deleted in LMDB leave the index too (their tombstones cover the saved file). */
  removed(tenant: string, labels: readonly number[]): void {
    for (const l of labels) this.tail.delete(tenant, l)
    const st = this.states.get(tenant)
    if (st && labels.length > 0) this.client.send({ type: 'delete', key: st.key, labels: [...labels] })
  }

  /** Throws the tenant's index away and builds it again from the entries in LMDB, re-embedding them (for measurements). */
  async rebuildNow(tenant: string): Promise<void> {
    this.tail.drop(tenant)
    this.request(tenant, true)
    const next = this.next(tenant)
    for (;;) {
      const st = this.states.get(tenant)
      if (!st || this.closing || (st.loaded && st.covered >= next)) return
      void this.feed.catchUp(tenant)
      await nextReport(st)
    }
  }

  /** Entries LMDB holds that the opened indexes do not cover yet. */
  backlog(): number {
    let n = 0
    for (const [tenant, st] of this.states) n += Math.max(0, this.next(tenant) - st.covered)
    return n
  }

  /** Saves every index with unsaved changes; failures are logged. */
  async saveAll(): Promise<void> {
    for (const [tenant, st] of [...this.states]) if (st.loaded && st.dirty > 0) await this.saves.save(tenant)
  }

  /** Stops the worker as a crash would (for tests): it is logged, started again, and the indexes reopened. */
  crashWorker(): Promise<void> {
    return this.client.crash()
  }

  /**
   * Stops the background work, lets the worker insert the vectors waiting in memory (no
   * embedding) for up to CLOSE_BUDGET_MS, saves what changed and stops the worker. What is left
   * is embedded again at the next start.
   */
  async close(): Promise<void> {
    this.closing = true
    this.saves.closing = true
    for (const st of this.states.values()) wake(st)
    await Promise.all([this.feed.running(), this.saves.running()])
    const open = [...this.states].filter(([, st]) => st.loaded)
    if (open.length > 0 && this.client.running) {
      for (const [tenant, st] of open) this.feed.send(tenant, st, this.next(tenant), Infinity)
      await this.client.request({ type: 'flush', ms: CLOSE_BUDGET_MS }).catch(() => undefined)
      for (const [tenant, st] of open) if (st.dirty > 0) await this.saves.writeNow(tenant)
    }
    await this.client.close()
  }

  /** Sends the open request and records the state it is for. `fresh`: an empty index, whatever is on disk. */
  private request(tenant: string, fresh: boolean): TenantState {
    const key = tenantKey(tenant)
    this.tenantOf.set(key, tenant)
    const next = this.next(tenant)
    const st: TenantState = {
      key,
      epoch: ++this.epochs,
      ready: Promise.resolve(true),
      loaded: fresh,
      covered: 0,
      sent: 0,
      dirty: 0,
      rebuilding: fresh && next > 0,
      stalled: false,
      waiters: [],
    }
    const old = this.states.get(tenant)
    this.states.set(tenant, st)
    if (old) wake(old)
    const tombstones = fresh
      ? []
      : [...this.db.tombstones.getKeys({ start: [tenant, 0], end: [tenant, Infinity] })].map((t) => t[1] as number)
    const reply = this.client.request<OpenReply>({
      type: 'open',
      key,
      epoch: st.epoch,
      labelsBelow: next,
      record: fresh ? undefined : this.record(key),
      tombstones,
      fresh,
    })
    // A fresh index is there for every later message (the worker takes them in order): no need to wait.
    st.ready = reply.then(
      (r) => {
        if (!fresh) this.opened(tenant, st, r, next)
        return true
      },
      () => false,
    )
    return st
  }

  private opened(tenant: string, st: TenantState, r: OpenReply, next: number): void {
    if (this.states.get(tenant) !== st) return
    st.loaded = true
    st.covered = st.sent = r.covered
    this.tail.prune(tenant, 0, r.covered)
    if (r.from === 'damaged') {
      this.opts.logger.warn(
        { err: new Error(r.reason), tenant_key: st.key, file: r.file, moved_to: r.movedTo },
        'memory index file is damaged: rebuilding the index from LMDB',
      )
    }
    if (r.from !== 'file' && next > 0) {
      st.rebuilding = true
      if (r.from === 'none') this.opts.logger.info({ tenant_key: st.key, labels: next }, 'no saved memory index: building it from LMDB')
    }
    if (st.covered < this.next(tenant)) void this.feed.catchUp(tenant)
  }

  /** The tenant's state once its index is loaded, or once it is clear that it will not be soon (the worker stopped). */
  private async loaded(tenant: string): Promise<TenantState> {
    const st = this.open(tenant)
    if (st.loaded) return st
    await st.ready
    return this.states.get(tenant) ?? st
  }

  private onEvent(m: WorkerEvent): void {
    const tenant = this.tenantOf.get(m.key)
    const st = tenant === undefined ? undefined : this.states.get(tenant)
    if (tenant === undefined || !st || st.epoch !== m.epoch) return
    if (m.type === 'failed') {
      wake(st)
      if (!st.rebuilding)
        return void this.replace(tenant, new Error(m.message), 'inserting into a memory index failed: rebuilding it from LMDB', m.label)
      // A fresh index fails too: stop here; the next add resumes, searches scan the rest.
      this.opts.logger.error(
        { err: new Error(m.message), tenant_key: st.key, label: m.label },
        'rebuilding a memory index failed; searches scan what it lacks',
      )
      this.acknowledge(tenant, st, m.covered)
      st.sent = st.covered
      st.stalled = true
      return
    }
    st.dirty = m.dirty
    this.acknowledge(tenant, st, m.covered)
    wake(st)
    // Saved once caught up, as before the worker: a file then covers every entry acknowledged so far.
    if (st.covered >= this.next(tenant)) this.caughtUp(tenant, st)
  }

  private acknowledge(tenant: string, st: TenantState, covered: number): void {
    if (covered > st.covered) this.tail.prune(tenant, st.covered, covered)
    st.covered = covered
    this.client.setBusy(this.inFlight())
  }

  /** A new worker holds nothing: every index is opened again (the vectors waiting in memory stay). */
  private reopenAll(): void {
    for (const tenant of [...this.states.keys()]) this.request(tenant, false)
  }

  /** An index whose native calls threw is not trusted again: a fresh one takes its place and is filled from LMDB. */
  private replace(tenant: string, err: unknown, msg: string, label?: number): void {
    this.opts.logger.warn({ err, tenant_key: tenantKey(tenant), ...(label === undefined ? {} : { label }) }, msg)
    this.request(tenant, true)
    void this.feed.catchUp(tenant)
  }

  private caughtUp(tenant: string, st: TenantState): void {
    if (this.closing) return
    if (st.rebuilding) {
      st.rebuilding = false
      this.opts.logger.info({ tenant_key: st.key, labels: st.covered }, 'memory index rebuilt from LMDB')
      this.saves.schedule(tenant)
    } else {
      this.saves.ifDue(tenant)
    }
  }

  private write(tenant: string): Promise<WriteReply> {
    const st = this.states.get(tenant)
    if (!st?.loaded) return Promise.reject(new Error('the memory index is not loaded'))
    return this.client.request<WriteReply>({ type: 'write', key: st.key })
  }

  private saved(tenant: string, written: WriteReply): void {
    const st = this.states.get(tenant)
    if (!st || st.epoch !== written.epoch) return
    st.dirty = Math.max(0, st.dirty - written.changes)
    this.client.send({ type: 'saved', key: st.key, epoch: st.epoch, changes: written.changes })
  }

  /** Inserts handed over and not acknowledged, or being prepared: the worker keeps the process alive meanwhile. */
  private inFlight(): boolean {
    if (this.feed.active) return true
    for (const st of this.states.values()) if (st.sent > st.covered) return true
    return false
  }

  private record(key: string): IndexFileRecord | undefined {
    return this.db.meta.get(recordKey(key)) as IndexFileRecord | undefined
  }

  private next(tenant: string): number {
    return this.db.stats.get(tenant)?.next ?? 0
  }
}
