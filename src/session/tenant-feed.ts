import type { EventEnvelope } from '../core/events.js'
import type { StreamControl } from '../core/session-service.js'
import { JOURNAL_ROW_SPAN, type EventStore, type JournalRow, type TenantJournal } from '../core/stores.js'
import type { EventHub } from './event-hub.js'
import type { Subscription } from './subscription.js'

/** Journal rows read at a time. */
const PAGE = 64
/** Rows whose events are kept for the other readers of the tenant (each row is read once, not once per reader). */
const SHARED_ROWS = 256

/**
 * The resumable tenant stream (`GET /v1/events`) where the store keeps a tenant journal: stored
 * events are read from the journal in commit order — live ones as the journal advances, missed
 * ones after `Last-Event-ID` the same way — each with its stream id (the journal position ×
 * JOURNAL_ROW_SPAN + its index in the row), so a reconnection resumes with no gap and no
 * duplicate, across restarts too. Text deltas are never stored: they come live from the hub and
 * may arrive before the stored event they follow on this stream.
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
  open(tenant: string, after: number | undefined): Subscription {
    let stream: TenantStream | undefined
    const sub = this.hub.subscribeTenant(tenant, true, () => stream && this.forget(tenant, stream))
    const head = this.journal.head(tenant)
    let from = head + 1
    let skip = -1
    let truncated: StreamControl | undefined
    if (after !== undefined) {
      const pos = Math.floor(after / JOURNAL_ROW_SPAN)
      const oldest = this.journal.oldest(tenant)
      if (pos > head) {
        // A position this journal never gave out (another data directory): from now, said so.
        truncated = truncation(after, (head + 1) * JOURNAL_ROW_SPAN, 'unknown_position')
      } else if (oldest > 1 && pos < oldest) {
        truncated = truncation(after, oldest * JOURNAL_ROW_SPAN, 'events_unavailable')
        from = oldest
      } else {
        from = pos
        skip = after % JOURNAL_ROW_SPAN
      }
    }
    if (truncated) sub.control(truncated)
    let set = this.streams.get(tenant)
    if (!set) this.streams.set(tenant, (set = new Set()))
    stream = new TenantStream(this.journal, (row) => this.rowEvents(tenant, row), tenant, sub, from, skip, this.queueLimit)
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
    const key = `${row.pos}\u0000${tenant}`
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

  constructor(
    private readonly journal: TenantJournal,
    private readonly rowEvents: (row: JournalRow) => Promise<EventEnvelope[]>,
    private readonly tenant: string,
    private readonly sub: Subscription,
    /** The next row to read, and the indexes in it already delivered (up to `skip`). */
    private next: number,
    private skip: number,
    private readonly queueLimit: number,
  ) {}

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
        const rows = this.journal.rowsFrom(this.tenant, this.next, PAGE)
        if (rows.length === 0) break
        for (const row of rows) {
          const events = await this.rowEvents(row)
          for (const e of events) {
            const index = e.seq - row.first
            if (row.pos === this.next && index <= this.skip) continue
            if (!this.sub.pushAt(e, row.pos * JOURNAL_ROW_SPAN + index)) return
          }
          this.next = row.pos + 1
          this.skip = -1
          // A long catch-up goes at the reader's pace, never past its queue's limit.
          if (this.sub.backlog > this.queueLimit / 2) await this.sub.drained()
        }
      }
    } while (this.again)
  }
}
