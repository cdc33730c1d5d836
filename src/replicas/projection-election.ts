import type { Logger } from '../core/logger.js'
import type { ProjectionWriterLease } from '../core/stores.js'
import type { Projector } from '../session/projector.js'

/**
 * One writer of the projection among replicas (BURROW_PROJECTION=on with PostgreSQL; docs/scaling.md,
 * The projection). Every replica tries the writer's lease at start and every third of its duration;
 * the one that holds it writes, the others write nothing. The writer hears only of its own commits,
 * so at each renewal it also catches up from the store's checkpoints — other replicas' commits,
 * deletions through them, and whatever a previous writer left pending when it died. It stops writing
 * as soon as a renewal fails or finds the lease taken, and at the latest when the lease it last held
 * runs out on its own clock (a renewal that hangs), so two replicas write at once only for the span
 * of a file write or a clock's drift — harmless, as each writes its own directory.
 */
export class ProjectionElection {
  private timer: NodeJS.Timeout | null = null
  private trying: Promise<void> | null = null
  private catching: Promise<void> | null = null
  /** On this process's clock: when the lease it last took or renewed runs out (0: not held). */
  private heldUntil = 0
  private closed = false

  constructor(
    private readonly lease: ProjectionWriterLease,
    private readonly projector: Projector,
    private readonly logger: Logger,
  ) {}

  /** Tries the lease once (a replica starting alone writes at once), then keeps trying in the background. */
  async start(): Promise<void> {
    await this.tick()
    if (this.heldUntil === 0) this.logger.info({}, 'another replica writes the projection: this one takes over if that one stops')
    this.timer = setInterval(
      () => {
        if (this.heldUntil > 0 && Date.now() >= this.heldUntil) this.lost('the writer lease ran out before it could be renewed')
        this.trying ??= this.tick().finally(() => (this.trying = null))
      },
      Math.max(100, Math.floor(this.lease.durationMs / 3)),
    )
    this.timer.unref()
  }

  /** Stops trying; the writer finishes what it started and gives the lease up, so another takes over at its next try. */
  async close(): Promise<void> {
    this.closed = true
    if (this.timer) clearInterval(this.timer)
    await this.trying
    await this.catching
    if (this.heldUntil === 0) return
    await this.projector.idle()
    await this.lease.release().catch((err: unknown) => this.logger.warn({ err }, 'the projection writer lease could not be released'))
  }

  private async tick(): Promise<void> {
    if (this.closed) return
    const asked = Date.now()
    let holds: boolean
    try {
      holds = await this.lease.hold()
    } catch (err) {
      if (this.heldUntil > 0) this.lost('the writer lease could not be renewed', err)
      return
    }
    if (this.closed) return
    if (!holds) {
      if (this.heldUntil > 0) this.lost('another replica holds the writer lease')
      return
    }
    // Counted from before the statement: the database's expiry is at least this late.
    const taken = this.heldUntil === 0
    this.heldUntil = asked + this.lease.durationMs
    if (taken) {
      this.logger.info({}, 'this replica writes the projection now: it catches up from the stored checkpoints')
      await this.projector.setWriting(true).catch((err: unknown) => this.catchUpFailed(err))
    } else this.catchUp()
  }

  /** Off the renewal's path: a slow scan must not delay the next renewal. */
  private catchUp(): void {
    this.catching ??= this.projector
      .catchUp()
      .catch((err: unknown) => this.catchUpFailed(err))
      .finally(() => (this.catching = null))
  }

  private catchUpFailed(err: unknown): void {
    this.logger.warn({ err }, 'the projection writer could not read what is pending: it tries again at the next renewal')
  }

  private lost(why: string, err?: unknown): void {
    this.heldUntil = 0
    this.logger.warn({ ...(err ? { err } : {}) }, `${why}: this replica stops writing the projection`)
    void this.projector.setWriting(false)
  }
}
