import type { Logger } from '../core/logger.js'
import type { Embedder } from '../core/memory-store.js'
import type { IndexWorkerClient } from './index-worker-client.js'
import { tenantKey } from './index-saves.js'
import type { MemoryDb } from './memory-db.js'
import { nextReport, type TenantState } from './tenant-index-state.js'
import type { VectorTail } from './vector-tail.js'

/** Labels handed to the worker in one message. */
const SEND_BATCH = 512
/** Labels handed to the worker and not yet acknowledged, at most (its queue; the tail keeps them meanwhile). */
const MAX_IN_FLIGHT = 8192
/** Entries embedded at a time when their vectors are not in memory. */
const EMBED_BATCH = 128
/** After indexing failed (an embedder endpoint down…), wait this long before trying again. */
const RETRY_MS = 5_000

/** What the feed works with (TenantIndexCache). */
export interface FeedContext {
  readonly db: MemoryDb
  readonly tail: VectorTail
  readonly client: IndexWorkerClient
  readonly embedder: Embedder
  readonly dim: number
  readonly logger: Logger
  state(tenant: string): TenantState | undefined
  closing(): boolean
  /** A feed ended. */
  ended(): void
}

/**
 * Streams the tenants' waiting vectors to the index worker: labels from an index's `sent` up to
 * LMDB's next label, in order, at most MAX_IN_FLIGHT ahead of what the worker acknowledged;
 * labels whose vectors are not in memory (after a restart, a rebuild, a worker that stopped) are
 * embedded from their content first. One feed per tenant at a time.
 */
export class IndexFeed {
  private readonly draining = new Map<string, Promise<void>>()
  /** After indexing failed: when to try again. */
  private readonly retryAt = new Map<string, number>()

  constructor(private readonly c: FeedContext) {}

  /** Starts feeding the tenant's index unless a feed runs or a retry is not due. Never rejects. */
  catchUp(tenant: string): Promise<void> {
    const running = this.draining.get(tenant)
    if (running) return running
    if ((this.retryAt.get(tenant) ?? 0) > Date.now()) return Promise.resolve()
    // Started a microtask later, so the entry is in the map before drain() can remove it.
    const done = Promise.resolve().then(() => this.drain(tenant))
    this.draining.set(tenant, done)
    this.c.client.setBusy(true)
    return done
  }

  /** Whether a feed runs. */
  get active(): boolean {
    return this.draining.size > 0
  }

  /** Every feed under way. */
  running(): Promise<unknown> {
    return Promise.all(this.draining.values())
  }

  /**
   * Sends up to `max` labels from `sent` on, in order, while their vectors are in the tail (one
   * message, the vectors packed in one transferred buffer): 'embed' when the next live label has
   * no vector in memory. Deleted labels are skipped; the index covers them once it has the rest.
   */
  send(tenant: string, st: TenantState, next: number, max: number): 'ok' | 'embed' {
    const { tail, db, dim } = this.c
    const labels: number[] = []
    const vectors: Float32Array[] = []
    let upTo = st.sent
    let outcome: 'ok' | 'embed' = 'ok'
    for (; upTo < next && labels.length < max; upTo++) {
      const v = tail.get(tenant, upTo)
      if (v === undefined) {
        if (db.entries.doesExist([tenant, upTo])) {
          outcome = 'embed'
          break
        }
      } else if (v === null) {
        this.c.logger.warn(
          { tenant_key: st.key, label: upTo },
          'the embedder gave a memory entry a vector of the wrong length: the entry is found by keywords only',
        )
        tail.delete(tenant, upTo)
      } else {
        labels.push(upTo)
        vectors.push(v)
      }
    }
    if (upTo > st.sent) {
      const packed = new Float32Array(labels.length * dim)
      vectors.forEach((v, i) => packed.set(v, i * dim))
      const ls = Float64Array.from(labels)
      this.c.client.send({ type: 'add', key: st.key, epoch: st.epoch, labels: ls, vectors: packed, upTo }, [packed.buffer, ls.buffer])
      st.sent = upTo
    }
    return outcome
  }

  /** The vector as the tail keeps it: float32, or null when it has the wrong length. */
  checked(vector: readonly number[]): Float32Array | null {
    return vector.length === this.c.dim ? Float32Array.from(vector) : null
  }

  /** Never rejects: a failure is logged and retried a little later. */
  private async drain(tenant: string): Promise<void> {
    try {
      for (;;) {
        const st = this.c.state(tenant)
        if (this.c.closing() || !st) break
        if (!st.loaded) {
          if (!(await st.ready) && this.c.state(tenant) === st) break
          continue
        }
        const next = this.next(tenant)
        if (st.sent >= next || st.stalled || !this.c.client.running) break
        if (st.sent - st.covered >= MAX_IN_FLIGHT) {
          await nextReport(st)
          continue
        }
        if (this.send(tenant, st, next, SEND_BATCH) === 'embed') await this.embedMissing(tenant, st, next)
      }
      this.retryAt.delete(tenant)
    } catch (err) {
      this.retryAt.set(tenant, Date.now() + RETRY_MS)
      this.c.logger.error(
        { err, tenant_key: tenantKey(tenant) },
        'indexing memory entries failed; searches scan what the index lacks, and it is tried again',
      )
    } finally {
      this.draining.delete(tenant)
      this.c.ended()
    }
  }

  /** Embeds the content of up to EMBED_BATCH live entries from `sent` whose vectors are not in memory, into the tail. */
  private async embedMissing(tenant: string, st: TenantState, next: number): Promise<void> {
    const { tail, db } = this.c
    const batch: Array<{ label: number; content: string }> = []
    for (const { key, value } of db.entries.getRange({ start: [tenant, st.sent], end: [tenant, next] })) {
      if (batch.length === EMBED_BATCH) break
      if (tail.get(tenant, key[1] as number) === undefined) batch.push({ label: key[1] as number, content: value.content })
    }
    if (batch.length === 0) return
    const vectors = await this.c.embedder.embed(batch.map((b) => b.content))
    // After the await: only entries still there, and not handed over meanwhile (by another index).
    const sent = this.c.state(tenant)?.sent ?? 0
    batch.forEach((b, i) => {
      if (b.label >= sent && tail.get(tenant, b.label) === undefined && db.entries.doesExist([tenant, b.label]))
        tail.set(tenant, b.label, this.checked(vectors[i]!))
    })
  }

  private next(tenant: string): number {
    return this.c.db.stats.get(tenant)?.next ?? 0
  }
}
