import type { EventEnvelope } from '../core/events.js'
import type { StreamControl } from '../core/session-service.js'
import { Subscription } from './subscription.js'

/** Fixed-capacity buffer of a session's most recent stored events, for replay. */
class RecentEvents {
  private readonly items: EventEnvelope[] = []
  private start = 0
  constructor(private readonly capacity: number) {}
  push(e: EventEnvelope): void {
    if (this.capacity <= 0) return
    if (this.items.length - this.start >= this.capacity) this.start++
    this.items.push(e)
    if (this.start > 1024 && this.start * 2 > this.items.length) {
      this.items.splice(0, this.start)
      this.start = 0
    }
  }
  /** Seq of the oldest event kept, or null when empty. */
  firstSeq(): number | null {
    return this.items.length > this.start ? this.items[this.start]!.seq : null
  }
  after(seq: number, upTo = Infinity): EventEnvelope[] {
    const out: EventEnvelope[] = []
    for (let i = this.start; i < this.items.length; i++) {
      const e = this.items[i]!
      if (e.seq > seq && e.seq <= upTo) out.push(e)
    }
    return out
  }
}

interface Channel {
  tenant: string
  recent: RecentEvents
  subs: Set<Subscription>
}

/** Events read from the log per replay page. */
const REPLAY_PAGE = 500

/**
 * Fan-out of events to subscribers, per session and per tenant, plus a bounded
 * per-session replay buffer. Publishing is synchronous and never waits on a reader.
 */
export class EventHub {
  private readonly channels = new Map<string, Channel>()
  private readonly tenantSubs = new Map<string, Set<Subscription>>()
  /** Subscriptions with frames to hand over; woken together once per event-loop turn. */
  private toWake: Subscription[] = []
  private readonly scheduleWake = (s: Subscription) => {
    if (this.toWake.length === 0) setImmediate(this.wakeAll)
    this.toWake.push(s)
  }
  private readonly wakeAll = () => {
    const subs = this.toWake
    this.toWake = []
    for (const s of subs) s.wake()
  }

  constructor(private readonly opts: { bufferSize: number; queueLimit: number }) {}

  open(sessionId: string, tenant: string): void {
    if (!this.channels.has(sessionId))
      this.channels.set(sessionId, { tenant, recent: new RecentEvents(this.opts.bufferSize), subs: new Set() })
  }

  publish(e: EventEnvelope): void {
    const ch = this.channels.get(e.session_id)
    if (!ch) return
    if (e.type !== 'text_delta') ch.recent.push(e)
    for (const s of ch.subs) s.push(e)
    const ts = this.tenantSubs.get(ch.tenant)
    if (ts) for (const s of ts) s.push(e)
  }

  /** Events still buffered with `after < seq <= upTo`. */
  buffered(sessionId: string, after: number, upTo = Infinity): EventEnvelope[] {
    return this.channels.get(sessionId)?.recent.after(after, upTo) ?? []
  }

  bufferStart(sessionId: string): number | null {
    return this.channels.get(sessionId)?.recent.firstSeq() ?? null
  }

  /**
   * A subscription to one session: registered for live events first (so none can slip
   * between), then — when `after` is given and behind `lastSeq` — replaying stored events
   * page by page, with `stream_truncated` first if the replay cannot start at `after + 1`.
   */
  async subscribeSession(
    sessionId: string,
    after: number | undefined,
    lastSeq: number,
    load: (from: number, limit: number) => Promise<EventEnvelope[]>,
  ): Promise<Subscription> {
    const ch = this.channels.get(sessionId)
    if (!ch) throw new Error(`no channel for ${sessionId}`)
    const sub = new Subscription(this.opts.queueLimit, (s) => ch.subs.delete(s), sessionId, this.scheduleWake)
    ch.subs.add(sub)
    if (after === undefined || after >= lastSeq) return sub
    try {
      const first = await load(after, REPLAY_PAGE)
      const firstSeq = first[0]?.seq ?? lastSeq + 1
      if (firstSeq > after + 1) {
        sub.control({
          type: 'stream_truncated',
          session_id: sessionId,
          data: { requested_after: after, first_seq: firstSeq, reason: 'events_unavailable' },
        })
      }
      void sub.replay(load, first, REPLAY_PAGE)
    } catch (err) {
      sub.close()
      throw err
    }
    return sub
  }

  subscribeTenant(tenant: string): Subscription {
    let set = this.tenantSubs.get(tenant)
    if (!set) {
      set = new Set()
      this.tenantSubs.set(tenant, set)
    }
    const s = set
    const sub = new Subscription(
      this.opts.queueLimit,
      (x) => {
        s.delete(x)
        if (s.size === 0 && this.tenantSubs.get(tenant) === s) this.tenantSubs.delete(tenant)
      },
      null,
      this.scheduleWake,
    )
    s.add(sub)
    return sub
  }

  /** True when a subscriber of the session or of its tenant would receive an event now. */
  hasListeners(sessionId: string): boolean {
    const ch = this.channels.get(sessionId)
    if (!ch) return false
    return ch.subs.size > 0 || (this.tenantSubs.get(ch.tenant)?.size ?? 0) > 0
  }

  subscriberCount(sessionId: string): number {
    return this.channels.get(sessionId)?.subs.size ?? 0
  }

  /** Forgets a session (evicted or deleted); its subscribers get `control` and end. */
  drop(sessionId: string, control?: StreamControl): void {
    const ch = this.channels.get(sessionId)
    if (!ch) return
    this.channels.delete(sessionId)
    for (const s of [...ch.subs]) control ? s.closeWith(control) : s.close()
  }

  closeAll(reason: 'shutdown'): void {
    for (const [id, ch] of this.channels)
      for (const s of [...ch.subs]) s.closeWith({ type: 'stream_closed', session_id: id, data: { reason } })
    for (const set of this.tenantSubs.values())
      for (const s of [...set]) s.closeWith({ type: 'stream_closed', session_id: null, data: { reason } })
  }
}
