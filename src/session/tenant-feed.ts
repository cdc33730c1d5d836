import type { EventEnvelope } from '../core/events.js'
import type { StreamControl } from '../core/session-service.js'
import { streamPosition, type EventStore, type JournalRow, type TenantJournal } from '../core/stores.js'
import type { EventHub } from './event-hub.js'
import type { Subscription } from './subscription.js'

/** Journal rows read at a time. */
const PAGE = 64
/** Rows whose events are kept for the other readers of the tenant (each row is read once, not once per reader). */
const SHARED_ROWS = 256
/** While rows wait for an older commit to end, the journal is asked again after this long, doubling up to the last. */
const WAIT_MIN_MS = 5
const WAIT_MAX_MS = 500

/**
 * The resumable tenant stream (`GET /v1/events`) where the store keeps a tenant journal: stored
 * events are read from the journal in commit order — live ones as the journal advances, missed
 * ones after `Last-Event-ID` the same way — each with its stream id (its row's base + its index
 * in the row, streamPosition), so a reconnection resumes with no gap and no duplicate, across
 * restarts too. Text deltas are never stored: they come live from the hub, and on this stream may
 * arrive before (or, from another replica, after) the stored event they follow.
 */
export class TenantFeed {
  private readonly streams = new Map<string, Set<TenantStream>>()
  /** The events of recently read rows, by tenant and position: every reader of a tenant needs the same ones. */
  private readonly recent = new Map<string, { sessionId: string; events: Promise<EventEnvelope[]> }>()

  constructor(
    private readonly hub: EventHub,
    private readonly journal: TenantJournal,
    private readonly events: EventStore,
    private readonly queueLimit: number,
  ) {
    journal.onAdvance((tenants) => {
      for (const t of tenants) for (const s of this.streams.get(t) ?? []) s.pump()
    })
  }

  /** The tenant's stream from after `after` (a stream id), or from now. */
  async open(tenant: string, after: number | undefined): Promise<Subscription> {
    const start = await this.journal.start(tenant, after)
    let stream: TenantStream | undefined
    const sub = this.hub.subscribeTenant(tenant, true, () => stream && this.forget(tenant, stream))
    if (start.truncated) sub.control(truncation(after!, start.truncated.first, start.truncated.reason))
    let set = this.streams.get(tenant)
    if (!set) this.streams.set(tenant, (set = new Set()))
    stream = new TenantStream(this.journal, (row) => this.rowEvents(tenant, row), tenant, sub, start.after, this.queueLimit)
    set.add(stream)
    stream.pump()
    return sub
  }

  /** A deleted session's rows read as nothing from now on: none of its events is kept here. */
  forgetSession(sessionId: string): void {
    for (const [key, r] of this.recent) if (r.sessionId === sessionId) this.recent.delete(key)
  }

  /** A row's events, read once for all the tenant's readers (a failed read is not kept). */
  private rowEvents(tenant: string, row: JournalRow): Promise<EventEnvelope[]> {
    const key = `${row.base}\u0000${tenant}`
    let r = this.recent.get(key)
    if (!r) {
      r = { sessionId: row.sessionId, events: this.events.readAfter(row.sessionId, row.first - 1, row.last) }
      this.recent.set(key, r)
      r.events.catch(() => this.recent.delete(key))
      if (this.recent.size > SHARED_ROWS) this.recent.delete(this.recent.keys().next().value as string)
    }
    return r.events
  }

  private forget(tenant: string, stream: TenantStream): void {
    stream.stop()
    const set = this.streams.get(tenant)
    if (!set) return
    set.delete(stream)
    if (set.size === 0) this.streams.delete(tenant)
  }
}

/** `stream_truncated` on the tenant stream: `first_seq` is the first stream id it can deliver. */
function truncation(after: number, first: number, reason: string): StreamControl {
  return { type: 'stream_truncated', session_id: null, data: { requested_after: after, first_seq: first, reason } }
}

/** One subscriber's reader: where it stands in the journal, and a loop that delivers what follows. */
class TenantStream {
  private reading = false
  private again = false
  private waitMs = 0
  private timer: NodeJS.Timeout | null = null
  private stopped = false

  constructor(
    private readonly journal: TenantJournal,
    private readonly rowEvents: (row: JournalRow) => Promise<EventEnvelope[]>,
    private readonly tenant: string,
    private readonly sub: Subscription,
    /** The stream id of the last event delivered (or skipped: before where the reader stands). */
    private after: number,
    private readonly queueLimit: number,
  ) {}

  /** The subscriber left: nothing more is read for it. */
  stop(): void {
    this.stopped = true
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
  }

  /** Reads and delivers every row past where it stands (once at a time; a call meanwhile reads again after). */
  pump(): void {
    if (this.reading) {
      this.again = true
      return
    }
    this.reading = true
    void this.run()
      .catch(() => this.sub.close()) // the reader reconnects with Last-Event-ID
      .finally(() => {
        this.reading = false
      })
  }

  private async run(): Promise<void> {
    do {
      this.again = false
      for (;;) {
        const { rows, waiting } = await this.journal.rowsAfter(this.tenant, this.after, PAGE)
        if (waiting) this.retry()
        else this.waitMs = 0
        if (rows.length === 0) break
        for (const row of rows) {
          const events = await this.rowEvents(row)
          for (const e of events) {
            const { pos, shown } = streamPosition(row, e.seq)
            if (pos <= this.after) continue
            if (!this.sub.pushAt(e, shown ? pos : null)) return
            if (shown) this.after = pos
            // A long catch-up goes at the reader's pace, never past its queue's limit.
            if (this.sub.backlog > this.queueLimit / 2) await this.sub.drained()
          }
          this.after = Math.max(this.after, streamPosition(row, row.last).pos)
        }
      }
    } while (this.again)
  }

  /** Rows wait for an older commit: asked again soon (no advance is announced for them). */
  private retry(): void {
    if (this.timer || this.stopped) return
    this.waitMs = Math.min(WAIT_MAX_MS, Math.max(WAIT_MIN_MS, this.waitMs * 2))
    this.timer = setTimeout(() => {
      this.timer = null
      this.pump()
    }, this.waitMs)
    this.timer.unref()
  }
}
