import { randomUUID } from 'node:crypto'
import pg from 'pg'
import { DELTA_PIECE, packed, pieces, type FeedMessage, type InterruptMessage } from './pg-feed-messages.js'
import { FeedRequests } from './pg-feed-requests.js'
import { openPool } from './pg-pool.js'

/** The channel of commits and text deltas; the channel of interrupts and their answers. */
const FEED = 'burrow_feed'
const INTERRUPTS = 'burrow_interrupt'
/** Reconnection delays of the listener: doubling from the first to the last. */
const RECONNECT_MIN_MS = 100
const RECONNECT_MAX_MS = 2_000
/** The listener is pinged this often, and lost when a ping is not answered within PING_TIMEOUT_MS (a silent network). */
const PING_MS = 5_000
const PING_TIMEOUT_MS = 5_000
/** A batch of notifications that could not be sent is tried again for this long, then dropped. */
const RESEND_FOR_MS = 30_000
/** After the listener was down, sessions changed since (down − this) are caught up: leaves room for clocks apart. */
const CLOCK_SLACK_MS = 10_000

/** What the change feed delivers to (the event hub's side, replicas/replica-feed.ts). */
export interface ChangeFeedSink {
  /** Another replica committed seqs `first..last` of the session. */
  committed(tenant: string, sessionId: string, first: number, last: number): void
  /** Another replica's text delta (after the stored event `seq`). */
  delta(tenant: string, sessionId: string, turn: number, seq: number, at: string, text: string): void
  /** Another replica deleted the session. */
  deleted(tenant: string, sessionId: string): void
  /** What local subscribers follow: what is caught up from the log after the listener reconnects. */
  watching(): { tenants: string[]; sessions: Array<{ sessionId: string; tenant: string }> }
}

/** This replica's side of a lease request: true once it gave the session's lease up, false if work holds it, null if it does not hold it. */
export type LetGoHandler = (tenant: string, sessionId: string) => Promise<boolean | null>

/** This replica's side of an interrupt: interrupts the session's turn if it runs here. */
export interface InterruptHandler {
  /** The turn's number once it is found running here (`found`), and resolves when it has ended; null if it does not run here. */
  (tenant: string, sessionId: string, found: (turn: number) => void): Promise<number | null>
}

export interface PgChangeFeedOptions {
  url: string
  replicaId: string
  sink: ChangeFeedSink
  /** Told when the listener connection is lost (with the error) and when it listens again. */
  onListening?: (listening: boolean, err?: unknown) => void
  /** Told of a failure that loses nothing durable (a notification batch dropped, a bad payload). */
  onError?: (err: unknown, what: string) => void
  /** This replica's answer to other replicas' interrupt requests (none: it never runs their turns). */
  interrupts?: InterruptHandler
  /** This replica's answer to other replicas' lease requests (none: it keeps no lease after work). */
  letGo?: LetGoHandler
}

/**
 * The replicas' change feed on PostgreSQL alone (docs/scaling.md). After each commit this replica
 * sends a NOTIFY on `burrow_feed` saying which seqs of which session it committed; text deltas,
 * which are never stored, travel the same way, in the same order. Every replica LISTENs on one
 * dedicated session connection (not from the pool: a LISTEN belongs to its connection, which is
 * why PgBouncer in transaction mode cannot carry it) and hands what other replicas sent to its sink.
 *
 * Notifications are sent from one queue, one statement at a time, so they arrive in the order they
 * were made; what queues while one is in flight goes together, consecutive deltas of a turn merged.
 * The listener reconnects by itself; while it is down `listening` is false (the replica is not
 * ready), and once it listens again it tells the sink of every watched session that changed
 * meanwhile, so subscribers catch up from the log.
 *
 * Interrupts: a request on `burrow_interrupt`; the replica running the turn answers `found`, then
 * `done` when the turn has ended. Lease requests go on the same channel: the replica keeping a
 * session's lease after its work answers whether it gave it up (replicas/lease-keeper.ts).
 */
export class PgChangeFeed {
  private client: pg.Client | null = null
  private readonly pool: pg.Pool
  private up = false
  private closed = false
  private delay = RECONNECT_MIN_MS
  private downSince: number | null = null
  private timer: NodeJS.Timeout | null = null
  private outbox: FeedMessage[] = []
  private sending = false
  /** This process's interrupt and lease requests waiting for their answers. */
  private readonly requests = new FeedRequests()
  /** The JSON size of the text of the last delta queued, while it is the outbox's last message (it may grow). */
  private lastDeltaBytes = 0
  /** Names this process in its notifications, to skip its own (unique even if two replicas share an id). */
  private readonly instance = randomUUID()
  /** Numbers this process's payloads: PostgreSQL delivers identical payloads of one transaction only once. */
  private sent = 0

  constructor(private readonly opts: PgChangeFeedOptions) {
    this.pool = openPool({ url: opts.url, size: 2, applicationName: `burrow ${opts.replicaId} feed` })
  }

  /** Starts listening; resolves after the first attempt (when it failed, it goes on trying in the background). */
  start(): Promise<void> {
    return this.connect()
  }

  /** Whether the listener connection is up and listening. */
  get listening(): boolean {
    return this.up
  }

  /** A commit made here: other replicas are told. Never throws (it runs on the commit's path). */
  committed(tenant: string, sessionId: string, first: number, last: number): void {
    this.queue({ k: 'c', t: tenant, s: sessionId, f: first, l: last })
  }

  /** A session deleted here: other replicas end their streams of it and forget it. Never throws. */
  deleted(tenant: string, sessionId: string): void {
    this.queue({ k: 'x', t: tenant, s: sessionId })
  }

  /** A text delta made here: other replicas' subscribers get it. Never throws. */
  delta(tenant: string, sessionId: string, turn: number, seq: number, at: string, text: string): void {
    const last = this.outbox[this.outbox.length - 1]
    const bytes = Buffer.byteLength(JSON.stringify(text))
    if (last?.k === 'd' && last.s === sessionId && last.n === turn && last.q === seq && this.lastDeltaBytes + bytes <= DELTA_PIECE) {
      last.x += text // coalesced while waiting to be sent, as a subscriber's own queue does
      this.lastDeltaBytes += bytes
      return
    }
    this.queue({ k: 'd', t: tenant, s: sessionId, n: turn, q: seq, a: at, x: text })
    const queued = this.outbox[this.outbox.length - 1]
    this.lastDeltaBytes = queued?.k === 'd' ? Buffer.byteLength(JSON.stringify(queued.x)) : 0
  }

  /**
   * Asks the replica running the session's turn to interrupt it. Resolves with the turn's number
   * once it has ended there, or null when no replica answered within `findMs` (none runs it), or
   * when the turn did not end within `endMs` of being found.
   */
  interrupt(tenant: string, sessionId: string, findMs: number, endMs: number): Promise<number | null> {
    return this.requests.ask<number | null>((id) => this.send(INTERRUPTS, { k: 'i', id, t: tenant, s: sessionId }), findMs, null, endMs)
  }

  /**
   * Asks the replica that keeps the session's lease after its work to give it up (LeaseKeeper):
   * true once it has, false when work holds it there, when nobody answered within `waitMs` (the
   * holder died: its lease runs to its expiry) or when this replica cannot hear the answer.
   */
  async letGo(tenant: string, sessionId: string, waitMs: number): Promise<boolean> {
    if (!this.up) return false
    try {
      return await this.requests.ask((id) => this.send(INTERRUPTS, { k: 'l', id, t: tenant, s: sessionId }), waitMs, false)
    } catch (err) {
      this.opts.onError?.(err, 'a lease request')
      return false
    }
  }

  /** Whether the store says a turn of the tenant's session is running (false for an unknown session). */
  async running(tenant: string, sessionId: string): Promise<boolean> {
    const r = await this.pool.query('SELECT running FROM sessions WHERE tenant = $1 AND session_id = $2', [tenant, sessionId])
    return r.rows[0]?.running === true
  }

  /**
   * Sessions' last seqs, and the first seq each stored at or after `since` (an ISO time), of the
   * sessions named and of the tenants' sessions updated since.
   */
  private async changedSince(
    tenants: string[],
    sessions: string[],
    since: string,
  ): Promise<Array<{ tenant: string; session_id: string; last_seq: string; first_since: string | null }>> {
    const r = await this.pool.query(
      `SELECT s.tenant, s.session_id, s.last_seq,
         (SELECT min(e.seq) FROM events e WHERE e.tenant = s.tenant AND e.session_id = s.session_id AND e.at >= $3) AS first_since
       FROM sessions s WHERE s.session_id = ANY($2::text[]) OR (s.tenant = ANY($1::text[]) AND s.updated_at >= $3)`,
      [tenants, sessions, since],
    )
    return r.rows
  }

  async close(): Promise<void> {
    this.closed = true
    if (this.timer) clearTimeout(this.timer)
    const c = this.client
    this.client = null
    this.up = false
    await c?.end().catch(() => undefined)
    await this.pool.end().catch(() => undefined)
  }

  private async connect(): Promise<void> {
    if (this.closed) return
    const c = new pg.Client({
      connectionString: this.opts.url,
      keepAlive: true,
      query_timeout: PING_TIMEOUT_MS,
      application_name: `burrow ${this.opts.replicaId} listener`,
    })
    let lost = false
    let ping: NodeJS.Timeout | undefined
    const onLost = (err?: unknown) => {
      if (lost) return
      lost = true
      clearInterval(ping)
      if (this.client === c) this.client = null
      c.end().catch(() => undefined)
      this.wentDown(err ?? new Error('the listener connection ended'))
    }
    c.on('error', onLost)
    c.on('end', () => onLost())
    c.on('notification', (n) => this.heard(n.channel, n.payload))
    try {
      await c.connect()
      await c.query(`LISTEN ${FEED}; LISTEN ${INTERRUPTS}`)
    } catch (err) {
      onLost(err)
      return
    }
    if (lost || this.closed) {
      await c.end().catch(() => undefined)
      return
    }
    this.client = c
    // A connection whose peer vanished without a word (a partition) is noticed by its ping timing out.
    ping = setInterval(() => void c.query('SELECT 1').catch(onLost), PING_MS)
    ping.unref()
    this.up = true
    this.delay = RECONNECT_MIN_MS
    const downSince = this.downSince
    this.downSince = null
    this.opts.onListening?.(true)
    if (downSince !== null) await this.catchUp(downSince)
  }

  private wentDown(err: unknown): void {
    const wasUp = this.up
    this.up = false
    this.downSince ??= Date.now()
    if (this.closed) return
    if (wasUp) this.opts.onListening?.(false, err)
    this.timer = setTimeout(() => {
      this.timer = null
      void this.connect()
    }, this.delay)
    this.delay = Math.min(RECONNECT_MAX_MS, this.delay * 2)
  }

  /** After an outage of the listener: every watched session that changed meanwhile, as a commit. */
  private async catchUp(downSince: number): Promise<void> {
    const { tenants, sessions } = this.opts.sink.watching()
    if (tenants.length === 0 && sessions.length === 0) return
    const since = new Date(downSince - CLOCK_SLACK_MS).toISOString()
    try {
      const rows = await this.changedSince(
        tenants,
        sessions.map((s) => s.sessionId),
        since,
      )
      for (const r of rows) {
        const last = Number(r.last_seq)
        this.opts.sink.committed(r.tenant, r.session_id, r.first_since === null ? last + 1 : Number(r.first_since), last)
      }
    } catch (err) {
      // Read again at the next reconnection, or when the next notification of a session comes.
      this.opts.onError?.(err, 'catching up after the listener reconnected')
    }
  }

  private heard(channel: string, payload: string | undefined): void {
    let msg: { r?: unknown; m?: unknown }
    try {
      msg = JSON.parse(payload ?? '')
    } catch (err) {
      this.opts.onError?.(err, `a notification on ${channel}`)
      return
    }
    if (msg.r === this.instance) return // this process's own: published here already
    try {
      if (channel === FEED) for (const m of msg.m as FeedMessage[]) this.deliver(m)
      else if (channel === INTERRUPTS) this.interruptMessage(msg.m as InterruptMessage)
    } catch (err) {
      this.opts.onError?.(err, `a notification on ${channel}`)
    }
  }

  private deliver(m: FeedMessage): void {
    if (m.k === 'c') this.opts.sink.committed(m.t, m.s, m.f, m.l)
    else if (m.k === 'd') this.opts.sink.delta(m.t, m.s, m.n, m.q, m.a, m.x)
    else this.opts.sink.deleted(m.t, m.s)
  }

  private interruptMessage(m: InterruptMessage): void {
    const { interrupts, letGo } = this.opts
    if (m.k === 'i') {
      interrupts?.(
        m.t,
        m.s,
        (n) => void this.send(INTERRUPTS, { k: 'f', id: m.id, n }).catch((err) => this.opts.onError?.(err, 'an interrupt')),
      )
        .then((n) => (n === null ? undefined : this.send(INTERRUPTS, { k: 'd', id: m.id, n })))
        .catch((err: unknown) => this.opts.onError?.(err, 'an interrupt'))
    } else if (m.k === 'l') {
      letGo?.(m.t, m.s)
        .then((ok) => (ok === null ? undefined : this.send(INTERRUPTS, { k: 'g', id: m.id, ok })))
        .catch((err: unknown) => this.opts.onError?.(err, 'a lease request'))
    } else if (m.k === 'f') this.requests.extend(m.id)
    else if (m.k === 'd') this.requests.answered(m.id, m.n)
    else this.requests.answered(m.id, m.ok)
  }

  private async send(channel: string, m: InterruptMessage): Promise<void> {
    await this.pool.query('SELECT pg_notify($1, $2)', [channel, JSON.stringify({ r: this.instance, m })])
  }

  private queue(m: FeedMessage): void {
    if (this.closed) return
    if (m.k === 'd') {
      // A long text is cut so that each notification stays under the payload limit.
      for (const piece of pieces(m.x)) this.outbox.push({ ...m, x: piece })
    } else this.outbox.push(m)
    if (!this.sending) {
      this.sending = true
      setImmediate(() => void this.flush())
    }
  }

  /** Sends what is queued, one statement at a time (so in order), until nothing is left. */
  private async flush(): Promise<void> {
    let failingSince: number | null = null
    while (this.outbox.length > 0 && !this.closed) {
      const batch = this.outbox
      this.outbox = []
      const payloads = packed(this.instance, batch, () => ++this.sent)
      const params = payloads.map((_, i) => `pg_notify('${FEED}', $${i + 1})`).join(', ')
      try {
        await this.pool.query(`SELECT ${params}`, payloads)
        failingSince = null
      } catch (err) {
        failingSince ??= Date.now()
        if (Date.now() - failingSince > RESEND_FOR_MS) {
          // Commits are caught up from the log when the listeners see the database again; deltas are lost.
          this.opts.onError?.(err, `${batch.length} change notifications (dropped)`)
          failingSince = null
          continue
        }
        this.outbox = batch.concat(this.outbox)
        await new Promise((r) => setTimeout(r, 200))
      }
    }
    this.sending = false
  }
}
