import type { EventEnvelope } from '../core/events.js'
import type { EventStore } from '../core/stores.js'
import { KeyedSerial } from '../core/keyed-serial.js'
import type { EventHub } from '../session/event-hub.js'

/** Events read from the log per page when another replica's commit is published here. */
const PAGE = 500
/** A failed read of the log is tried again this many times, this long apart (then the next commit of the session catches up). */
const RETRIES = 3
const RETRY_MS = 250

/**
 * What other replicas commit and stream, published to this replica's subscribers through the
 * event hub. A commit ("seqs first..last of session S") is read back from the log — from the last
 * seq the hub published for S when it knows one, so a missed notification leaves no gap — and
 * published in order; a text delta is published as it comes, after the commits heard before it.
 * Each session's work runs in order on a chain of its own; sessions go in parallel. When nobody
 * here follows the session (nor its tenant), nothing is read: the hub only notes how far it got.
 */
export class ReplicaFeed {
  private readonly perSession = new KeyedSerial()

  constructor(
    private readonly hub: EventHub,
    private readonly log: EventStore,
    private readonly onError: (err: unknown, sessionId: string) => void,
    /** Another replica deleted the session: this replica forgets it and ends its streams. */
    private readonly onDeleted: (sessionId: string) => void,
  ) {}

  committed(tenant: string, sessionId: string, first: number, last: number): void {
    this.then(sessionId, () => this.publishCommitted(tenant, sessionId, first, last))
  }

  delta(tenant: string, sessionId: string, turn: number, seq: number, at: string, text: string): void {
    const e: EventEnvelope<'text_delta'> = { seq, session_id: sessionId, turn, type: 'text_delta', at, data: { text } }
    this.then(sessionId, () => this.hub.publishRemote(e, tenant))
  }

  deleted(_tenant: string, sessionId: string): void {
    this.then(sessionId, () => this.onDeleted(sessionId))
  }

  watching(): ReturnType<EventHub['watching']> {
    return this.hub.watching()
  }

  /** Resolves once everything heard so far has been published (tests, shutdown). */
  async idle(): Promise<void> {
    await this.perSession.idle()
  }

  private then(sessionId: string, step: () => void | Promise<void>): void {
    void this.perSession.run(sessionId, step).catch((err: unknown) => this.onError(err, sessionId))
  }

  private async publishCommitted(tenant: string, sessionId: string, first: number, last: number): Promise<void> {
    if (!this.hub.listening(sessionId, tenant)) {
      this.hub.passed(sessionId, last)
      return
    }
    let from = this.hub.publishedSeq(sessionId) ?? first - 1
    for (let attempt = 0; from < last;) {
      let page: EventEnvelope[]
      try {
        page = await this.log.readAfter(sessionId, from, last, PAGE)
      } catch (err) {
        if (++attempt > RETRIES) throw err
        await new Promise((r) => setTimeout(r, RETRY_MS * attempt))
        continue
      }
      if (page.length === 0) return // deleted meanwhile
      for (const e of page) this.hub.publishRemote(e, tenant)
      from = page[page.length - 1]!.seq
    }
  }
}
