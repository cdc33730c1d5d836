import { createHash } from 'node:crypto'
import { BurrowError } from '../core/errors.js'
import { idempotencyKey, idempotencyKeyParts } from '../core/idempotency-keys.js'
import type { CallContext } from '../core/session-service.js'
import type { IdempotencyRecord, IdempotencyStore, IdempotencyWrite } from '../core/stores.js'

export { idempotencyKey }

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000
/** How long a retry waits for its key's first attempt running on another replica before SESSION_BUSY (docs/api.md). */
export const IDEMPOTENCY_WAIT_MS = 30_000

/** JSON with sorted keys, so a retried body matches whatever its key order. */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null'
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`
  const o = v as Record<string, unknown>
  return `{${Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
    .join(',')}}`
}

export function fingerprint(op: string, body: unknown): string {
  return createHash('sha256').update(op).update('\0').update(canonicalJson(body)).digest('hex')
}

/**
 * A request's Idempotency-Key, handed to the work it runs: the work commits the outcome with its
 * last write (`seal`), in the same transaction, so a crash leaves both or neither. Work that
 * writes nothing leaves the receipt unsealed, and the outcome is then remembered after it.
 */
export class Receipt {
  private sealedWith: IdempotencyWrite | null = null

  constructor(
    /** The service's key (`tenant \0 session \0 key`). */
    readonly key: string,
    /** The caller's part of it, as a turn records it in `turn_started`. */
    readonly callerKey: string,
    readonly fingerprint: string,
    /** Whether the outcome was already committed by someone (under the session's lease: see `Idempotency`). */
    private readonly lookUp: () => Promise<boolean>,
    /** The claim this process holds on the key (stores shared by processes): the outcome's commit checks it. */
    private readonly claimAt?: number,
  ) {}

  /** The record of `outcome`, for the commit of the work's last events. */
  seal(outcome: IdempotencyRecord['outcome']): IdempotencyWrite {
    // A copy, as the stores would read it back: the answer may share arrays the session goes on changing before the commit is written.
    const copy = JSON.parse(JSON.stringify(outcome)) as IdempotencyRecord['outcome']
    this.sealedWith = {
      key: this.key,
      record: { fingerprint: this.fingerprint, created_at: Date.now(), outcome: copy },
      ...(this.claimAt !== undefined ? { claim: this.claimAt } : {}),
    }
    return this.sealedWith
  }

  /** Whether a commit carried the outcome. */
  get sealed(): boolean {
    return this.sealedWith !== null
  }

  /**
   * Throws {@link AlreadyRun} when the key's outcome is stored already. Work on a store several
   * processes share calls it holding the session's lease, after the lease's holder before it was
   * closed: every commit of the session is made under its lease, so what it finds then is final.
   */
  async ensureFirst(): Promise<void> {
    if (await this.lookUp()) throw new AlreadyRun()
  }
}

/** Thrown by work whose key turned out to have run already: its stored outcome is the answer. */
export class AlreadyRun extends Error {}

/** What a recorded turn's run failed with, as the outcome of its request. */
export function failedOutcome(err: BurrowError): IdempotencyRecord['outcome'] {
  return { ok: false, code: err.code, message: err.message, data: err.data ?? {} }
}

export interface IdempotentCall<T> {
  key: string
  op: string
  body: unknown
  run: (receipt: Receipt) => Promise<T>
  /** Called with a remembered outcome before it is returned (e.g. to replay a turn's events). */
  onReplay?: ((outcome: IdempotencyRecord['outcome']) => Promise<void>) | undefined
}

/**
 * Runs a call at most once per key: a retry with the same request gets the first outcome
 * (waiting for it if still running — in this process, or with a shared store in another, for up
 * to `waitMs`); a different request under the same key is `IDEMPOTENCY_CONFLICT`. The work
 * commits its outcome with its last write (a {@link Receipt}); errors are outcomes only when the
 * call did work (a failed turn carries `data.turn`), so rejected requests can be retried.
 */
export class Idempotency {
  private readonly inflight = new Map<string, { fp: string; done: Promise<unknown> }>()

  constructor(
    private readonly store: IdempotencyStore,
    private readonly ttlMs = IDEMPOTENCY_TTL_MS,
    /** Told when an outcome could not be remembered (the store refuses writes). */
    private readonly onUnremembered: (err: unknown, key: string) => void = () => {},
    /** With a shared store: how long a retry waits for the first attempt running elsewhere. */
    private readonly waitMs = IDEMPOTENCY_WAIT_MS,
  ) {}

  run<T>(c: IdempotentCall<T>): Promise<T> {
    const fp = fingerprint(c.op, c.body)
    const running = this.inflight.get(c.key)
    if (running) {
      if (running.fp !== fp) return Promise.reject(conflict())
      // After the first call: its remembered outcome, or a run of its own if nothing was remembered.
      return running.done.then(
        () => this.run(c),
        () => this.run(c),
      )
    }
    // Registered before the store is asked, so a second call meanwhile waits instead of running too.
    const done = this.lookUpOrExecute(c, fp)
    this.inflight.set(c.key, { fp, done })
    const clear = () => {
      if (this.inflight.get(c.key)?.done === done) this.inflight.delete(c.key)
    }
    done.then(clear, clear)
    return done
  }

  private async lookUpOrExecute<T>(c: IdempotentCall<T>, fp: string): Promise<T> {
    if (this.store.claim) return this.claimOrWait(c, fp)
    const rec = await this.store.get(c.key)
    if (rec && Date.now() - rec.created_at < this.ttlMs) return this.replay(c, fp, rec)
    return this.execute(c, fp)
  }

  /**
   * A store shared by several processes: the key is claimed in the store (insert if absent), so one
   * process runs the call. A retry that finds it running elsewhere waits for its outcome, polling,
   * for up to `waitMs`, then answers SESSION_BUSY: the first attempt still runs.
   */
  private async claimOrWait<T>(c: IdempotentCall<T>, fp: string): Promise<T> {
    const deadline = Date.now() + this.waitMs
    for (let pause = 20; ; pause = Math.min(pause * 2, 250)) {
      const found = await this.store.claim!(c.key, fp)
      if (found.kind === 'claimed') return this.execute(c, fp, true, found.at)
      if (found.kind === 'done') return this.replay(c, fp, found.record)
      if (found.fingerprint !== fp) throw conflict()
      if (Date.now() >= deadline)
        throw new BurrowError(
          'SESSION_BUSY',
          'A request with this Idempotency-Key is still running (on this or another replica); retry it later for its result.',
          { reason: 'idempotency_key_in_progress' },
        )
      await new Promise((r) => setTimeout(r, pause))
    }
  }

  private async replay<T>(c: IdempotentCall<T>, fp: string, rec: IdempotencyRecord): Promise<T> {
    if (rec.fingerprint !== fp) throw conflict()
    if (c.onReplay) await c.onReplay(rec.outcome)
    if (rec.outcome.ok) return rec.outcome.value as T
    throw new BurrowError(rec.outcome.code as BurrowError['code'], rec.outcome.message, { ...rec.outcome.data, replayed: true })
  }

  private async execute<T>(c: IdempotentCall<T>, fp: string, claimed = false, claimAt?: number): Promise<T> {
    const receipt = new Receipt(c.key, callerPart(c.key), fp, async () => (await this.store.get(c.key)) !== undefined, claimAt)
    let value: T
    try {
      value = await c.run(receipt)
    } catch (err) {
      if (err instanceof AlreadyRun) {
        // The outcome stored over this process's claim: the claim is over.
        this.store.completed?.(c.key)
        const rec = await this.store.get(c.key)
        if (rec) return this.replay(c, fp, rec)
      }
      if (receipt.sealed) this.store.completed?.(c.key)
      else if (err instanceof BurrowError && err.data && typeof err.data.turn === 'number') {
        // A failure recorded without its outcome (the work ended before its last commit could carry it).
        await this.remember(c.key, { fingerprint: fp, created_at: Date.now(), outcome: failedOutcome(err) })
      } else if (claimed) {
        // Refused before any work: the key is free again (left, the claim would expire by itself).
        await this.store.release?.(c.key).catch((e: unknown) => this.onUnremembered(e, c.key))
      }
      throw err
    }
    if (receipt.sealed) this.store.completed?.(c.key)
    else await this.remember(c.key, { fingerprint: fp, created_at: Date.now(), outcome: { ok: true, value } })
    return value
  }

  /**
   * For work that committed nothing its outcome could go with (a PATCH that changes nothing, a
   * compaction): failing to remember it (a full disk) must not turn a success into an error the
   * client would retry — the answer goes out, the failure is reported.
   */
  private async remember(key: string, record: IdempotencyRecord): Promise<void> {
    try {
      await this.store.put(key, record)
    } catch (err) {
      this.onUnremembered(err, key)
    }
  }
}

function conflict(): BurrowError {
  return new BurrowError('IDEMPOTENCY_CONFLICT', undefined, { field: 'header/idempotency-key' })
}

/**
 * Runs `run` at most once per the caller's Idempotency-Key (the service's idempotency scope),
 * handing it the key's receipt (null without a key) for its last commit to carry the outcome.
 */
export type IdempotentRunner = <T>(
  ctx: CallContext,
  tenant: string,
  op: string,
  sessionId: string | null,
  body: unknown,
  run: (receipt: Receipt | null) => Promise<T>,
  onReplay?: (o: IdempotencyRecord['outcome']) => Promise<void>,
) => Promise<T>

/** The service's runner over `idem`: a call with the caller's key goes through it, one without runs as it is. */
export function idempotentRunner(idem: Idempotency): IdempotentRunner {
  return (ctx, tenant, op, sessionId, body, run, onReplay) => {
    const callerKey = ctx.idempotencyKey
    if (!callerKey) return run(null)
    return idem.run({ key: idempotencyKey(tenant, sessionId, callerKey), op, body, run, onReplay })
  }
}

/** The caller's part of a service key; a bare key (as tests give) is its own. */
function callerPart(key: string): string {
  return key.includes('\u0000') ? idempotencyKeyParts(key)[2] : key
}
