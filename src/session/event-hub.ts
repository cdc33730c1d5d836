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
    const last = this.items[this.items.length - 1]
    if (last && this.items.length > this.start && e.seq <= last.seq) return // already kept (a replica's catch-up)
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
/** Sessions whose last published / known seq the hub remembers (the oldest are forgotten past it). */
const SEQ_MEMORY = 100_000

function remember(map: Map<string, number>, id: string, seq: number): void {
  if ((map.get(id) ?? -1) >= seq) return
  map.delete(id) // re-inserted last: the map forgets the sessions it heard of longest ago
  map.set(id, seq)
  if (map.size > SEQ_MEMORY) map.delete(map.keys().next().value!)
}

export interface EventHubOptions {
  bufferSize: number
  queueLimit: number
  /**
   * Other replicas may have subscribers (BURROW_SESSION_STORE=postgres): every session counts as
   * listened to, so its text deltas are produced and handed to `sendDeltas`'s outlet.
   */
  replicated?: boolean
}

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

  /** Per session: the last stored seq published here (by this replica or from another's commit). */
  private readonly published = new Map<string, number>()
  /** Per session: the last stored seq known to be committed (published here or not). */
  private readonly known = new Map<string, number>()
  /** Where this replica's text deltas go for the other replicas' subscribers (see `replicated`). */
  private outlet: ((e: EventEnvelope, tenant: string) => void) | null = null

  constructor(private readonly opts: EventHubOptions) {}

  /** Frames a subscriber may have waiting before it is dropped as a slow consumer. */
  get queueLimit(): number {
    return this.opts.queueLimit
  }

  /** Hands every text delta published here to `outlet` as well (the replicas' change feed). */
  sendDeltas(outlet: (e: EventEnvelope, tenant: string) => void): void {
    this.outlet = outlet
  }

  open(sessionId: string, tenant: string): void {
    if (!this.channels.has(sessionId))
      this.channels.set(sessionId, { tenant, recent: new RecentEvents(this.opts.bufferSize), subs: new Set() })
  }

  publish(e: EventEnvelope): void {
    const ch = this.channels.get(e.session_id)
    if (!ch) return
    if (e.type !== 'text_delta') {
      remember(this.published, e.session_id, e.seq)
      remember(this.known, e.session_id, e.seq)
      ch.recent.push(e)
    } else if (this.outlet) {
      try {
        this.outlet(e, ch.tenant)
      } catch {
        /* the feed's failure is its own: local subscribers still get the delta */
      }
    }
    for (const s of ch.subs) s.push(e)
    const ts = this.tenantSubs.get(ch.tenant)
    if (ts) for (const s of ts) if (!s.deltasOnly || e.type === 'text_delta') s.push(e)
  }

  /**
   * An event another replica committed (read back from the log) or streamed (a text delta), for
   * the subscribers here: of its session when it has a channel here, and of its tenant. A stored
   * event at or below the session's last published seq is dropped (no duplicate after a catch-up).
   */
  publishRemote(e: EventEnvelope, tenant: string): void {
    if (e.type !== 'text_delta') {
      if (e.seq <= (this.published.get(e.session_id) ?? 0)) return
      remember(this.published, e.session_id, e.seq)
      remember(this.known, e.session_id, e.seq)
    }
    const ch = this.channels.get(e.session_id)
    if (ch) {
      if (e.type !== 'text_delta') ch.recent.push(e)
      for (const s of ch.subs) s.push(e)
    }
    const ts = this.tenantSubs.get(ch?.tenant ?? tenant)
    if (ts) for (const s of ts) if (!s.deltasOnly || e.type === 'text_delta') s.push(e)
  }

  /** The last stored seq of the session published here, if the hub remembers one. */
  publishedSeq(sessionId: string): number | undefined {
    return this.published.get(sessionId)
  }

  /** The last stored seq of the session known here to be committed (published here or not), if the hub remembers one. */
  knownSeq(sessionId: string): number | undefined {
    return this.known.get(sessionId)
  }

  /**
   * Whether a subscriber here would receive the session's stored events now from the hub (of the
   * session, or of `tenant`; a tenant stream fed from the journal reads them there).
   */
  listening(sessionId: string, tenant: string): boolean {
    const ch = this.channels.get(sessionId)
    if (ch !== undefined && ch.subs.size > 0) return true
    for (const s of this.tenantSubs.get(ch?.tenant ?? tenant) ?? []) if (!s.deltasOnly) return true
    return false
  }

  /**
   * Another replica committed up to `last` and nobody here listened: nothing is read or published.
   * The session's replay buffer, which now misses those events, starts afresh (replays read the log).
   */
  passed(sessionId: string, last: number): void {
    remember(this.published, sessionId, last)
    remember(this.known, sessionId, last)
    const ch = this.channels.get(sessionId)
    if (ch) ch.recent = new RecentEvents(this.opts.bufferSize)
  }

  /**
   * The session was loaded again from the store at `last` (another replica wrote it): the replay
   * buffer, which misses those events, starts afresh. Its subscribers stay — what they miss comes
   * from the feed, or from the log when this replica's next event arrives first (Subscription.push).
   * What was published here is not moved on: the feed still publishes the events it has to.
   */
  reloaded(sessionId: string, last: number): void {
    remember(this.known, sessionId, last)
    const ch = this.channels.get(sessionId)
    if (ch) ch.recent = new RecentEvents(this.opts.bufferSize)
  }

  /** What subscribers here follow: tenants (whole-tenant streams) and sessions (their own streams). */
  watching(): { tenants: string[]; sessions: Array<{ sessionId: string; tenant: string }> } {
    const sessions: Array<{ sessionId: string; tenant: string }> = []
    for (const [sessionId, ch] of this.channels) if (ch.subs.size > 0) sessions.push({ sessionId, tenant: ch.tenant })
    return { tenants: [...this.tenantSubs.keys()], sessions }
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
   * page by page, with `stream_truncated` first if the replay cannot start at `after + 1`. Without
   * `after`, `start` (when given) is where the subscriber stands: what is known stored past it is
   * replayed the same way, and a live event that does not follow it is preceded by the missing ones.
   */
  async subscribeSession(
    sessionId: string,
    after: number | undefined,
    lastSeq: number,
    load: (from: number, limit: number) => Promise<EventEnvelope[]>,
    start?: number,
  ): Promise<Subscription> {
    const ch = this.channels.get(sessionId)
    if (!ch) throw new Error(`no channel for ${sessionId}`)
    // The caller's record may be behind commits another replica made: what the hub heard counts too.
    lastSeq = Math.max(lastSeq, this.known.get(sessionId) ?? 0)
    const sub = new Subscription(this.opts.queueLimit, (s) => ch.subs.delete(s), sessionId, this.scheduleWake)
    const from = after ?? start
    sub.fillGapsFrom(load, REPLAY_PAGE, from)
    ch.subs.add(sub)
    if (from === undefined || from >= lastSeq) return sub
    try {
      const first = await load(from, REPLAY_PAGE)
      const firstSeq = first[0]?.seq ?? lastSeq + 1
      if (after !== undefined && firstSeq > after + 1) {
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

  /** Every session's events of the tenant, live — text deltas only when `deltasOnly` (the stored ones then come from the journal). */
  subscribeTenant(tenant: string, deltasOnly = false, onClosed?: () => void): Subscription {
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
        onClosed?.()
      },
      null,
      this.scheduleWake,
    )
    sub.deltasOnly = deltasOnly
    s.add(sub)
    return sub
  }

  /** True when a subscriber of the session or of its tenant would receive an event now (always, with replicas). */
  hasListeners(sessionId: string): boolean {
    const ch = this.channels.get(sessionId)
    if (!ch) return false
    if (this.opts.replicated) return true
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
