import type { SearchReply } from './index-worker-protocol.js'

/**
 * The search lane: one vector search at a time handed to the index worker through shared
 * memory instead of a message each way.
 *
 * Why: on a virtual machine a thread that has slept for a few hundred microseconds takes
 * ~100 µs to run again, and a `postMessage` costs its sender ~50 µs — together more than the
 * hnswlib search itself at 20,000 entries (docs/benchmarks.md, memory-search). Through the lane
 * a request is a few stores into a SharedArrayBuffer; the worker notices it while its event
 * loop is kept turning (for {@link LANE_HOT_MS} after its last lane request, so a user's next
 * search finds it awake), else by a `wake` message; the main thread notices the answer on its
 * next turn of the event loop, which it keeps turning (setImmediate, never blocking it) while
 * the answer is due.
 *
 * States of the slot (word STATE), and who moves them:
 *   IDLE → ASKED      main, with the slot filled (only from IDLE: one request at a time)
 *   ASKED → ANSWERED  worker, with the answer in the slot; main reads it and sets IDLE
 *   ASKED → GAVE_UP   main, after {@link LANE_WAIT_MS} without an answer (the worker is inside a
 *                     long call: a save, a load); the worker then answers by message and sets IDLE
 * A failed search is answered by message too (the worker sets IDLE); so is any request the main
 * thread stopped waiting for. Either way it is the same request id, resolved once.
 */

export const IDLE = 0
export const ASKED = 1
export const ANSWERED = 2
export const GAVE_UP = 3

/** Int32 words of the control block. */
const STATE = 0
/** 1 while the worker's event loop is kept turning and watches the slot (no `wake` needed). */
const AWAKE = 1
const K = 2
/** ef, or 0 for the index's default. */
const EF = 3
const KEY_BYTES = 4
const COUNT = 5
/** Eight words: the Float64 words after them stay aligned. */
const CONTROL_WORDS = 8

/** Float64 words after the control block: the answer's `covered` and `epoch`, and the request's id (past int32). */
const META_WORDS = 3
const COVERED = 0
const EPOCH = 1
const ID = 2

/** The most results a lane answer holds (a search asks for max(CANDIDATES, limit): 30 through the API, whose limit is at most 20). */
export const LANE_MAX_K = 256
/** The longest tenant key in UTF-8 bytes (keys are 24 hex characters). */
export const LANE_MAX_KEY = 128
/** How long the worker keeps watching the slot after a lane request. */
export const LANE_HOT_MS = 1
/** How long the main thread waits on the lane before asking for the answer by message. */
export const LANE_WAIT_MS = 20

/** Typed views of one lane's shared memory (both threads make the same from the buffer). */
export class LaneMemory {
  readonly control: Int32Array
  readonly meta: Float64Array
  readonly vector: Float64Array
  readonly labels: Float64Array
  readonly scores: Float64Array
  readonly key: Uint8Array

  constructor(
    readonly buffer: SharedArrayBuffer,
    readonly dim: number,
  ) {
    let at = 0
    this.control = new Int32Array(buffer, at, CONTROL_WORDS)
    at += CONTROL_WORDS * 4
    this.meta = new Float64Array(buffer, at, META_WORDS)
    at += META_WORDS * 8
    this.vector = new Float64Array(buffer, at, dim)
    at += dim * 8
    this.labels = new Float64Array(buffer, at, LANE_MAX_K)
    at += LANE_MAX_K * 8
    this.scores = new Float64Array(buffer, at, LANE_MAX_K)
    at += LANE_MAX_K * 8
    this.key = new Uint8Array(buffer, at, LANE_MAX_KEY)
  }

  static create(dim: number): LaneMemory {
    return new LaneMemory(new SharedArrayBuffer(CONTROL_WORDS * 4 + (META_WORDS + dim + 2 * LANE_MAX_K) * 8 + LANE_MAX_KEY), dim)
  }

  state(): number {
    return Atomics.load(this.control, STATE)
  }

  /** Whether the worker watches the slot now (a request needs no wake). */
  awake(): boolean {
    return Atomics.load(this.control, AWAKE) === 1
  }
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** The main thread's side: asks, and watches for the answer without blocking its event loop. */
export class LaneClient {
  constructor(
    readonly memory: LaneMemory,
    /** Posts a `wake` message to the worker. */
    private readonly wake: () => void,
  ) {}

  /**
   * Puts a search in the slot when it is free and the request fits; false otherwise (ask by
   * message). `settle` is called once with the answer read from the slot; when the answer comes
   * by message instead (a failure, a late answer), the caller's pending request takes it.
   */
  ask(
    id: number,
    req: { key: string; vector: ArrayLike<number>; k: number; ef?: number | undefined },
    settle: (reply: SearchReply) => void,
    pending: () => boolean,
  ): boolean {
    const m = this.memory
    if (req.k > LANE_MAX_K || req.vector.length !== m.dim || m.state() !== IDLE) return false
    const key = encoder.encode(req.key)
    if (key.length > LANE_MAX_KEY) return false
    const c = m.control
    m.key.set(key)
    m.vector.set(req.vector)
    m.meta[ID] = id
    c[K] = req.k
    c[EF] = req.ef ?? 0
    c[KEY_BYTES] = key.length
    Atomics.store(c, STATE, ASKED)
    if (!m.awake()) this.wake()
    const deadline = performance.now() + LANE_WAIT_MS
    const tick = (): void => {
      // Settled by message (a failure, the worker gone), or a newer request holds the slot: done here.
      if (!pending() || m.meta[ID] !== id) return
      const s = Atomics.load(c, STATE)
      if (s === ANSWERED) {
        const n = c[COUNT]!
        const reply: SearchReply = {
          labels: m.labels.slice(0, n),
          scores: m.scores.slice(0, n),
          covered: m.meta[COVERED]!,
          epoch: m.meta[EPOCH]!,
        }
        Atomics.store(c, STATE, IDLE)
        settle(reply)
        return
      }
      // IDLE: answered by message (it is on its way); GAVE_UP: likewise, asked for below.
      if (s !== ASKED) return
      if (performance.now() >= deadline && Atomics.compareExchange(c, STATE, ASKED, GAVE_UP) === ASKED) return
      setImmediate(tick)
    }
    setImmediate(tick)
    return true
  }
}

function waiting(state: number): boolean {
  return state === ASKED || state === GAVE_UP
}

/** A lane request as the worker reads it. */
export interface LaneRequest {
  id: number
  key: string
  vector: Float64Array
  k: number
  ef: number | undefined
}

/** The worker's side. */
export class LaneHost {
  private hotUntil = 0
  private hot = false
  /** Inside check(): the messages it drains may hold a `wake`, which must not serve the slot twice. */
  private serving = false

  constructor(
    private readonly memory: LaneMemory,
    /** Answers a request: the reply, or throws (then it goes by message as a failure). */
    private readonly serve: (req: LaneRequest) => SearchReply,
    /** Sends an answer by message (the main thread gave up on the lane, or the search failed). */
    private readonly reply: (id: number, outcome: { ok: true; value: SearchReply } | { ok: false; err: unknown }) => void,
    /** Handles the messages waiting on the port, in order (those sent before the lane request). */
    private readonly drain: () => void,
  ) {}

  /** Serves the slot if a request waits there, then keeps watching it for LANE_HOT_MS. */
  check(): void {
    const c = this.memory.control
    if (this.serving || !waiting(Atomics.load(c, STATE))) return
    this.serving = true
    try {
      // What the main thread sent before this request comes first (an open, a delete, inserts to catch up on).
      this.drain()
      if (waiting(Atomics.load(c, STATE))) this.answer()
    } finally {
      this.serving = false
    }
    this.hotUntil = performance.now() + LANE_HOT_MS
    if (this.hot) return
    this.hot = true
    Atomics.store(c, AWAKE, 1)
    setImmediate(() => this.watch())
  }

  private watch(): void {
    const c = this.memory.control
    if (performance.now() < this.hotUntil) {
      this.check()
      setImmediate(() => this.watch())
      return
    }
    this.hot = false
    Atomics.store(c, AWAKE, 0)
    // A request stored before the main thread saw AWAKE 0 has no wake message: look once more.
    this.check()
  }

  private answer(): void {
    const m = this.memory
    const c = m.control
    const req: LaneRequest = {
      id: m.meta[ID]!,
      key: decoder.decode(m.key.slice(0, c[KEY_BYTES]!)),
      vector: m.vector.slice(),
      k: c[K]!,
      ef: c[EF]! > 0 ? c[EF]! : undefined,
    }
    let value: SearchReply
    try {
      value = this.serve(req)
    } catch (err) {
      Atomics.store(c, STATE, IDLE)
      this.reply(req.id, { ok: false, err })
      return
    }
    const n = Math.min(value.labels.length, LANE_MAX_K)
    m.labels.set(value.labels.subarray(0, n))
    m.scores.set(value.scores.subarray(0, n))
    m.meta[COVERED] = value.covered
    m.meta[EPOCH] = value.epoch
    c[COUNT] = n
    if (Atomics.compareExchange(c, STATE, ASKED, ANSWERED) === ASKED) return
    // The main thread gave up waiting: the answer goes by message, and the slot is free again.
    Atomics.store(c, STATE, IDLE)
    this.reply(req.id, { ok: true, value })
  }
}
