import { TenantIndex } from './hnsw-index.js'
import { DamagedIndexError } from './index-file.js'
import { moveAside } from './index-dir.js'
import type {
  FromWorker,
  IndexNotice,
  IndexRequest,
  IndexWorkerData,
  OpenReply,
  ScoreReply,
  SearchReply,
  ToWorker,
  WriteReply,
} from './index-worker-protocol.js'
import { LaneHost, LaneMemory, type LaneRequest } from './search-lane.js'

/** Milliseconds of inserts between two turns of the worker's event loop (messages are also taken between inserts, see `poll`). */
const SLICE_MS = 4
/**
 * Before a search or score, the index's queued inserts — sent before it — are made first when
 * there are at most this many (an add of a few passages): an entry added a moment ago then scores
 * as the index scores it whichever way the race with its insert went (the main thread's exact
 * scan of waiting vectors computes the cosine in float64, which differs in the last digits).
 * A longer backlog is not waited for.
 */
const CATCH_UP_LABELS = 16

interface Batch {
  labels: Float64Array
  vectors: Float32Array
  upTo: number
  at: number
}

interface Hosted {
  index: TenantIndex
  epoch: number
  /** Inserts waiting, in label order. */
  queue: Batch[]
  /** Labels deleted while they waited in the queue: skipped. */
  dropped: Set<number>
  /** covered and dirty as last reported. */
  reported: { covered: number; dirty: number }
}

/** A request the host cannot answer; `broken`: a native call on the index threw. */
class HostError extends Error {
  constructor(
    message: string,
    readonly broken = false,
  ) {
    super(message)
  }
}

/**
 * The tenants' HNSW indexes inside the index worker (index-worker.ts wires it to its port):
 * every hnswlib call of the store happens here. Inserts are queued and made a slice at a time
 * (SLICE_MS); between two inserts the host takes the messages waiting on its port (`poll`), so
 * a search waits for at most one insert, not a slice. After each slice it reports how far each
 * index got (`progress`). Messages are handled in the order they come, so an index is always
 * opened before it is searched, and a deletion applied before a later search or write.
 */
export class IndexHost {
  private readonly hosted = new Map<string, Hosted>()
  private scheduled = false
  /** Messages taken by `poll` during a slice that must wait for its end (a flush: it inserts itself), with those after it. */
  private deferred: ToWorker[] = []
  private inserting = false
  /** The search lane (search-lane.ts), when the main thread gave one. */
  private readonly lane: LaneHost | undefined

  /**
   * `poll`: the next message waiting on the port, taken synchronously (receiveMessageOnPort);
   * `exit`: ends the worker.
   */
  constructor(
    private readonly data: IndexWorkerData,
    private readonly post: (m: FromWorker, transfer?: ArrayBuffer[]) => void,
    private readonly poll: () => ToWorker | undefined = () => undefined,
    private readonly exit: (code: number) => void = () => undefined,
  ) {
    this.lane = data.lane
      ? new LaneHost(
          new LaneMemory(data.lane, data.dim),
          (req) => this.search(req),
          (id, outcome) =>
            outcome.ok ? this.post({ type: 'reply', id, ok: true, value: outcome.value }) : this.post(failure(id, outcome.err)),
          () => this.takeWaiting(),
        )
      : undefined
  }

  /** Handles one message from the main thread. */
  handle(m: ToWorker): void {
    if (m.type === 'exit') return this.exit(m.code)
    if (m.type === 'wake') return this.lane?.check()
    this.receive(m)
  }

  private receive(m: (IndexRequest & { id: number }) | IndexNotice): void {
    if (m.type === 'add' || m.type === 'delete' || m.type === 'saved') return this.notice(m)
    try {
      const [value, transfer] = this.answer(m)
      this.post({ type: 'reply', id: m.id, ok: true, value }, transfer)
    } catch (err) {
      this.post(failure(m.id, err))
    }
  }

  private notice(m: IndexNotice): void {
    const h = this.hosted.get(m.key)
    if (!h) return
    if (m.type === 'add') {
      if (m.epoch !== h.epoch) return
      h.queue.push({ labels: m.labels, vectors: m.vectors, upTo: m.upTo, at: 0 })
      this.schedule()
    } else if (m.type === 'delete') {
      for (const label of m.labels) {
        if (label < h.index.covered) h.index.remove(label)
        else h.dropped.add(label)
      }
      this.report(m.key, h)
    } else if (m.epoch === h.epoch) {
      h.index.dirty = Math.max(0, h.index.dirty - m.changes)
      h.reported.dirty = h.index.dirty
    }
  }

  private answer(m: IndexRequest & { id: number }): [unknown, ArrayBuffer[]?] {
    if (m.type === 'open') return [this.open(m)]
    if (m.type === 'flush') {
      this.insert(performance.now() + m.ms, false)
      return [null]
    }
    const h = this.hosted.get(m.key)
    if (!h) throw new HostError(`no index is open for ${m.key}`)
    if (m.type === 'search' || m.type === 'score') this.catchUp(m.key, h)
    if (m.type === 'search') {
      const reply = this.searchHosted(h, m)
      return [reply, [reply.labels.buffer as ArrayBuffer, reply.scores.buffer as ArrayBuffer]]
    }
    if (m.type === 'score') {
      const labels: number[] = []
      const scores: number[] = []
      for (const label of m.labels) {
        const p = h.index.point(label)
        if (!p) continue
        let s = 0
        for (let i = 0; i < p.length; i++) s += m.vector[i]! * p[i]!
        labels.push(label)
        scores.push(s)
      }
      const reply: ScoreReply = { labels: Float64Array.from(labels), scores: Float64Array.from(scores) }
      return [reply, [reply.labels.buffer as ArrayBuffer, reply.scores.buffer as ArrayBuffer]]
    }
    const reply: WriteReply = { ...h.index.write(this.data.dir, m.key), changes: h.index.dirty, epoch: h.epoch }
    return [reply]
  }

  /** A search asked through the lane: as one asked by message, once the inserts it may wait for are made. */
  private search(req: LaneRequest): SearchReply {
    const h = this.hosted.get(req.key)
    if (!h) throw new HostError(`no index is open for ${req.key}`)
    this.catchUp(req.key, h)
    return this.searchHosted(h, req)
  }

  /** Before a search or score: a short queue of inserts (sent before it) is made first, see CATCH_UP_LABELS. */
  private catchUp(key: string, h: Hosted): void {
    if (h.queue.length === 0 || queued(h) > CATCH_UP_LABELS) return
    this.insertSome(key, h, Infinity, false)
    this.report(key, h)
  }

  private searchHosted(h: Hosted, m: { vector: Float64Array; k: number; ef?: number | undefined }): SearchReply {
    let found
    try {
      found = h.index.search(plainArray(m.vector, 0, m.vector.length), m.k, undefined, m.ef)
    } catch (err) {
      throw new HostError(`searching the index failed: ${(err as Error).message}`, true)
    }
    const reply: SearchReply = {
      labels: new Float64Array(found.length),
      scores: new Float64Array(found.length),
      covered: h.index.covered,
      epoch: h.epoch,
    }
    found.forEach((f, i) => {
      reply.labels[i] = f.label
      reply.scores[i] = f.score
    })
    return reply
  }

  /** The messages waiting on the port, handled in order (between two inserts of a slice, as {@link handleWaiting} does). */
  private takeWaiting(): void {
    if (this.inserting) return this.handleWaiting()
    for (let m = this.poll(); m; m = this.poll()) this.handle(m)
  }

  /**
   * The key's newest saved file (checked before hnswlib reads it) with the deletions recorded
   * since, else an empty index. A damaged file is moved aside and reported.
   */
  private open(m: Extract<IndexRequest, { type: 'open' }>): OpenReply {
    const { dir, dim, params } = this.data
    let index: TenantIndex | null = null
    let reply: OpenReply = { covered: 0, from: m.fresh ? 'fresh' : 'none' }
    if (!m.fresh) {
      try {
        index = TenantIndex.load(dir, m.key, dim, { labelsBelow: m.labelsBelow, record: m.record, params })
      } catch (err) {
        const file = err instanceof DamagedIndexError ? err.file : undefined
        reply = { covered: 0, from: 'damaged', file, movedTo: file ? moveAside(dir, m.key, file) : null, reason: (err as Error).message }
      }
    }
    if (index) {
      for (const label of m.tombstones) if (label < index.covered) index.remove(label)
      reply = { covered: index.covered, from: 'file' }
    } else {
      index = TenantIndex.create(dim, params)
    }
    this.hosted.set(m.key, {
      index,
      epoch: m.epoch,
      queue: [],
      dropped: new Set(),
      reported: { covered: index.covered, dirty: index.dirty },
    })
    return reply
  }

  private schedule(): void {
    if (this.scheduled) return
    this.scheduled = true
    setImmediate(() => {
      this.scheduled = false
      const more = this.insert(performance.now() + SLICE_MS, true)
      const deferred = this.deferred
      this.deferred = []
      for (const m of deferred) this.handle(m)
      if (more) this.schedule()
    })
  }

  /**
   * Inserts queued vectors until the deadline, the indexes in turn; reports progress. True when
   * some still wait. `polling`: messages waiting on the port are handled between inserts.
   */
  private insert(deadline: number, polling: boolean): boolean {
    let more = false
    this.inserting = polling
    try {
      for (const [key, h] of [...this.hosted]) {
        if (h.queue.length === 0 || this.hosted.get(key) !== h) continue
        if (performance.now() >= deadline) {
          more = true
          break
        }
        if (!this.insertSome(key, h, deadline)) more = true
        // Still this key's index (a message handled meanwhile may have replaced it): report; the next slice starts with another index.
        if (this.hosted.get(key) !== h) continue
        this.report(key, h)
        this.hosted.delete(key)
        this.hosted.set(key, h)
      }
    } finally {
      this.inserting = false
    }
    return more
  }

  /** Between two inserts: the messages waiting on the port, in order; a flush and what follows it wait for the slice's end. */
  private handleWaiting(): void {
    while (this.inserting && this.deferred.length === 0) {
      const m = this.poll()
      if (!m) return
      if (m.type === 'flush') this.deferred.push(m)
      else this.handle(m)
    }
    // Once one message waits for the slice's end, so do all after it.
    for (let m = this.deferred.length > 0 ? this.poll() : undefined; m; m = this.poll()) this.deferred.push(m)
    // A lane request does not wait for the slice either (the worker may look awake to the main thread, which sent no wake).
    this.lane?.check()
  }

  /** True when the queue is empty (or the index was replaced meanwhile). */
  private insertSome(key: string, h: Hosted, deadline: number, polling = true): boolean {
    const dim = this.data.dim
    while (h.queue.length > 0) {
      const b = h.queue[0]!
      while (b.at < b.labels.length) {
        if (polling) {
          this.handleWaiting()
          // A message handled meanwhile may have replaced the index, or made (or dropped) these inserts itself.
          if (this.hosted.get(key) !== h) return true
          if (h.queue[0] !== b) break
        }
        if (performance.now() >= deadline) return false
        const label = b.labels[b.at]!
        const from = b.at * dim
        b.at++
        if (h.dropped.delete(label)) continue
        try {
          h.index.add(label, plainArray(b.vectors, from, dim))
        } catch (err) {
          // Not trusted again: the main thread replaces the index (or, rebuilding, stops until the next add).
          h.queue = []
          h.dropped.clear()
          this.post({ type: 'failed', key, epoch: h.epoch, label, covered: h.index.covered, message: (err as Error).message })
          return true
        }
      }
      if (h.queue[0] !== b) continue
      if (b.upTo > h.index.covered) h.index.covered = b.upTo
      h.queue.shift()
      if (h.dropped.size > 0) for (const l of h.dropped) if (l < h.index.covered) h.dropped.delete(l)
    }
    return true
  }

  private report(key: string, h: Hosted): void {
    const { covered, dirty } = h.index
    if (covered === h.reported.covered && dirty === h.reported.dirty) return
    h.reported = { covered, dirty }
    this.post({ type: 'progress', key, epoch: h.epoch, covered, dirty })
  }
}

/**
 * `n` numbers of a typed array from `from`, as the plain array hnswlib-node takes. A loop: `Array.from`
 * of a typed array goes through its iterator, about 10 µs for 384 numbers here against 1 µs — on a
 * search's critical path.
 */
function plainArray(v: Float32Array | Float64Array, from: number, n: number): number[] {
  const out = new Array<number>(n)
  for (let i = 0; i < n; i++) out[i] = v[from + i]!
  return out
}

/** Inserts still queued for the index. */
function queued(h: Hosted): number {
  let n = 0
  for (const b of h.queue) n += b.labels.length - b.at
  return n
}

function failure(id: number, err: unknown): FromWorker {
  return {
    type: 'reply',
    id,
    ok: false,
    message: (err as Error).message,
    ...(err instanceof HostError && err.broken ? { broken: true } : {}),
  }
}
