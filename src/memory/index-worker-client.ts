import { Worker } from 'node:worker_threads'
import type { Logger } from '../core/logger.js'
import type { FromWorker, IndexNotice, IndexRequest, IndexWorkerData, SearchReply, WorkerEvent } from './index-worker-protocol.js'
import { LaneClient, LaneMemory } from './search-lane.js'

/**
 * Starts the worker module next to this one: index-worker.js in the build, index-worker.ts when
 * this module was itself loaded as TypeScript (the sources through tsx: `npm run dev`, benchmarks
 * with BENCH_APP=src). Only then does the worker register tsx's loader, in itself: a worker does
 * not inherit the loaders registered in the main thread. Plain CommonJS run with `eval` (as
 * use-lite-embedder.ts starts its worker). `execArgv: []`: the worker needs none of the process's
 * own flags, and `--import` hooks the process was started with would load again in every worker.
 */
const BOOT = `
const { workerData } = require('node:worker_threads')
const ready = workerData.tsx ? import(workerData.tsx).then((m) => m.register()) : Promise.resolve()
ready.then(() => import(workerData.entry))
`

/** How long close() waits for the worker to end itself before terminating it. */
const EXIT_WAIT_MS = 10_000
/** A pause before restarting a worker that stopped soon after it started (doubling up to this). */
const MAX_RESTART_DELAY_MS = 30_000
const QUICK_EXIT_MS = 10_000

/** The request could not be answered: the worker stopped (or is being restarted, or closed). */
export class IndexWorkerGone extends Error {
  constructor(message = 'the memory index worker is not running') {
    super(message)
    this.name = 'IndexWorkerGone'
  }
}

/** The worker answered with an error; `broken`: a native call on the index threw, so it is not trusted again. */
export class IndexRequestError extends Error {
  constructor(
    message: string,
    readonly broken: boolean,
  ) {
    super(message)
    this.name = 'IndexRequestError'
  }
}

export interface IndexWorkerEvents {
  /** Progress of inserts, or an insert that failed. */
  event(m: WorkerEvent): void
  /** The worker stopped without being asked: pending requests have failed, a new one starts soon. */
  stopped(): void
  /** A new worker runs after the previous one stopped: the indexes it held are gone. */
  restarted(): void
}

interface Pending {
  resolve: (v: unknown) => void
  reject: (e: Error) => void
}

/**
 * The main thread's side of the index worker: one message per request, answered by id, in
 * order. A worker that stops without being asked (a crash, an out-of-memory kill, a test) is
 * logged and started again — at once, or after a pause that doubles while it keeps stopping
 * soon after starting — and `restarted` tells the owner to open its indexes again; requests
 * pending or made meanwhile reject with {@link IndexWorkerGone}, never hang. The worker keeps
 * the process alive only while a request is pending or the owner says it is busy (inserts in flight).
 */
export class IndexWorkerClient {
  private worker: Worker | undefined
  /** Resolves when the current worker has exited. */
  private ended: Promise<void> = Promise.resolve()
  private nextId = 0
  private readonly pending = new Map<number, Pending>()
  private closed = false
  private busy = false
  private refd = true
  private startedAt = 0
  private restartDelay = 0
  private restartTimer: NodeJS.Timeout | undefined
  /** Searches answered through a search lane so far. */
  laneAnswers = 0
  /** The current worker's search lane (a new one per worker: a stopped worker may have left it mid-request). */
  private lane: LaneClient | undefined

  constructor(
    private readonly data: IndexWorkerData,
    private readonly events: IndexWorkerEvents,
    private readonly logger: Logger,
  ) {
    this.start()
  }

  /** Whether a worker runs now (requests made while none does reject at once). */
  get running(): boolean {
    return this.worker !== undefined
  }

  request<T>(msg: IndexRequest, transfer: ArrayBuffer[] = []): Promise<T> {
    const w = this.worker
    if (!w) return Promise.reject(new IndexWorkerGone())
    const id = ++this.nextId
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject })
      w.postMessage({ ...msg, id }, transfer)
      this.updateRef()
    })
  }

  /**
   * A nearest-neighbour search, answered exactly as {@link request} answers a `search`. With
   * `lane` (the caller searches alone: see MemoryCore) through the search lane when it is free
   * (search-lane.ts: no message either way; this thread's event loop keeps turning, polling for
   * the answer, instead of sleeping), else by message — under load, where this thread has other
   * requests to serve meanwhile and polling would take CPU from them and from the worker.
   */
  search(req: { key: string; vector: readonly number[]; k: number; ef?: number | undefined }, lane = false): Promise<SearchReply> {
    const id = ++this.nextId
    const answered = (reply: SearchReply) => {
      this.laneAnswers++
      this.settle(id, reply)
    }
    if (lane && this.worker && this.lane?.ask(id, req, answered, () => this.pending.has(id)))
      return new Promise<SearchReply>((resolve, reject) => {
        this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject })
        this.updateRef()
      })
    const q = Float64Array.from(req.vector)
    return this.request<SearchReply>({ type: 'search', key: req.key, vector: q, k: req.k, ef: req.ef }, [q.buffer])
  }

  /** A message without an answer; dropped when no worker runs (its indexes are opened again from LMDB and files). */
  send(msg: IndexNotice, transfer: ArrayBuffer[] = []): void {
    this.worker?.postMessage(msg, transfer)
  }

  /** While busy (inserts in flight), the worker keeps the process alive. */
  setBusy(busy: boolean): void {
    this.busy = busy
    this.updateRef()
  }

  /** Makes the worker exit as a crash would (for tests): logged, restarted, its indexes opened again. */
  async crash(): Promise<void> {
    const ended = this.ended
    this.worker?.postMessage({ type: 'exit', code: 1 })
    await ended
  }

  /**
   * Stops the worker for good once it has finished what it is doing (terminated only if it does
   * not end within EXIT_WAIT_MS); pending and later requests reject.
   */
  async close(): Promise<void> {
    this.closed = true
    clearTimeout(this.restartTimer)
    const w = this.worker
    if (w) {
      w.postMessage({ type: 'exit', code: 0 })
      const timer = setTimeout(() => void w.terminate(), EXIT_WAIT_MS)
      await this.ended
      clearTimeout(timer)
    }
    this.fail(new IndexWorkerGone('the memory index worker is closed'))
  }

  private start(): void {
    const ts = import.meta.url.endsWith('.ts')
    const workerData = {
      ...this.data,
      entry: new URL(ts ? './index-worker.ts' : './index-worker.js', import.meta.url).href,
      tsx: ts ? import.meta.resolve('tsx/esm/api') : undefined,
    }
    const lane = LaneMemory.create(this.data.dim)
    const w = new Worker(BOOT, { eval: true, execArgv: [], workerData: { ...workerData, lane: lane.buffer } })
    this.worker = w
    this.lane = new LaneClient(lane, () => w.postMessage({ type: 'wake' }))
    this.refd = true
    this.startedAt = performance.now()
    w.on('message', (m: FromWorker) => {
      if (w === this.worker) this.receive(m)
    })
    w.on('error', (err) => this.logger.error({ err }, 'the memory index worker failed'))
    this.ended = new Promise((resolve) => w.once('exit', () => resolve()))
    w.on('exit', (code) => this.exited(w, code))
    this.updateRef()
  }

  private receive(m: FromWorker): void {
    if (m.type !== 'reply') return this.events.event(m)
    if (m.ok) this.settle(m.id, m.value)
    else this.settle(m.id, undefined, new IndexRequestError(m.message, m.broken === true))
  }

  /** Ends a pending request (once: a later answer to the same id finds nothing). */
  private settle(id: number, value: unknown, err?: Error): void {
    const p = this.pending.get(id)
    if (!p) return
    this.pending.delete(id)
    this.updateRef()
    if (err) p.reject(err)
    else p.resolve(value)
  }

  private exited(w: Worker, code: number): void {
    if (w !== this.worker) return
    this.worker = undefined
    this.fail(new IndexWorkerGone(`the memory index worker stopped (exit code ${code})`))
    if (this.closed) return
    const quick = performance.now() - this.startedAt < QUICK_EXIT_MS
    this.restartDelay = quick ? Math.min(MAX_RESTART_DELAY_MS, Math.max(100, this.restartDelay * 2)) : 0
    this.logger.error(
      { exit_code: code, restart_in_ms: this.restartDelay },
      'the memory index worker stopped: it is started again and its indexes loaded again; searches meanwhile use the keywords and the vectors waiting in memory',
    )
    this.restartTimer = setTimeout(() => {
      if (this.closed) return
      this.start()
      this.logger.info({}, 'the memory index worker was started again')
      this.events.restarted()
    }, this.restartDelay)
    this.restartTimer.unref()
    this.events.stopped()
  }

  private fail(err: Error): void {
    const pending = [...this.pending.values()]
    this.pending.clear()
    for (const p of pending) p.reject(err)
  }

  private updateRef(): void {
    const w = this.worker
    const want = this.pending.size > 0 || this.busy
    if (!w || want === this.refd) return
    this.refd = want
    if (want) w.ref()
    else w.unref()
  }
}
