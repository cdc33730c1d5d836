import type { EventEnvelope } from './events.js'
import type { SessionId } from './ids.js'
import type { SessionNote } from './session-record.js'
import type { TraceContext } from './tracing.js'
import type {
  AccessToken,
  Capabilities,
  Problem,
  CompactionOutcome,
  CreateSession,
  InterruptResult,
  MemoryAdd,
  MemoryAdded,
  MemoryItem,
  MemoryPageQuery,
  MemorySearchQuery,
  MemorySearchResult,
  Page,
  ResumeTurn,
  SessionCreated,
  SessionQuery,
  SessionStatus,
  SessionSummary,
  SessionView,
  StartTurn,
  TokenRequest,
  TurnResult,
  UpdateSession,
  ForkSession,
} from './wire.js'

/**
 * Who is calling and how to reach them. Surfaces fill it from their transport;
 * the service authenticates `apiKey` itself, so every surface inherits tenancy.
 */
export interface CallContext {
  /** The credential as presented (bearer token, `?access_token=`), or undefined. */
  apiKey?: string | undefined
  /** Correlates logs and problem bodies. */
  requestId: string
  /** A client-chosen key: the same key and request return the first result without re-running. */
  idempotencyKey?: string | undefined
  /** Receives the call's events as they happen (a turn's own stream), text deltas included. */
  onEvent?: ((event: EventEnvelope) => void) | undefined
  /** Told once if a turn request waits for the session (`on_busy: queue`): its place in line, or null behind another replica. */
  onQueued?: ((position: number | null) => void) | undefined
  /** The caller's span (the HTTP request's, with tracing on): the parent of the spans the call opens. */
  trace?: TraceContext | undefined
}

/** A control frame a subscription may yield besides events. */
export type StreamControl =
  | { type: 'stream_truncated'; session_id: string | null; data: { requested_after: number; first_seq: number; reason: string } }
  | { type: 'stream_closed'; session_id: string | null; data: { reason: 'slow_consumer' | 'shutdown' | 'session_deleted' } }
  /**
   * The last frame of a turn's own stream when the turn ended with an error no stored event reports
   * (its events could not be stored: the store failed, or another replica took the session over):
   * the problem document the same request would have answered without a stream.
   */
  | { type: 'stream_closed'; session_id: string; data: { reason: 'error'; problem: Problem } }
  /** The first frame of a turn's own stream when the turn waits for the session (`on_busy: queue`). */
  | { type: 'turn_queued'; session_id: string; data: { position: number | null } }

/**
 * A frame of a stream. A stored event's SSE id is its seq on a session's stream; on the tenant
 * stream it is `id`, the event's position in the tenant's journal (TenantJournal; null: the frame
 * has none).
 */
export type StreamFrame = { kind: 'event'; event: EventEnvelope; id?: number | null } | { kind: 'control'; control: StreamControl }

/**
 * A live subscription: replayed events first, then live ones, with no gap and no
 * duplicate at the seam. It yields the frames that are ready as one batch (so a
 * transport can write them at once); iteration ends after a `stream_closed` frame or `close()`.
 */
export interface EventSubscription extends AsyncIterable<StreamFrame[]> {
  close(): void
  /**
   * Called once if the service ends the subscription (slow consumer, shutdown, deletion).
   * The final `stream_closed` frame is queued; a transport whose reader is stalled
   * should give up on delivering it after a grace period.
   */
  onEnd(cb: () => void): void
  /**
   * Push mode, for transports that write synchronously (a socket): `write` gets each
   * ready batch as soon as it is ready and returns false when the transport is full;
   * delivery then pauses (frames queue, bounded) until `resume()`. `onDone` runs once
   * the subscription has ended (after its final frame, if any). Use either this or iteration.
   */
  attach(write: (batch: StreamFrame[]) => boolean, onDone: () => void): { resume(): void }
}

export interface SubscribeOptions {
  /** Replay stored events with seq > after (the tenant stream: with a stream id > after), then tail. Undefined: live only. */
  after?: number | undefined
}

/** A page of a session's stored events (the JSON counterpart of the SSE replay). */
export interface EventPage {
  events: EventEnvelope[]
  /** True when events after `after` exist but are no longer available (ephemeral buffer overrun). */
  truncated: boolean
  /** The session's last stored seq: there is more to read while the last event's seq is below it. */
  last_seq: number
}

/**
 * The operations every surface offers — what a remote client (the typed HTTP client)
 * implements too. Every method authenticates `ctx`, scopes to the caller's tenant
 * (another tenant's session is `SESSION_NOT_FOUND`) and throws only `BurrowError`.
 */
export interface SessionOperations {
  createSession(req: CreateSession, ctx: CallContext): Promise<SessionCreated>
  /** With `ctx.onEvent`, the turn's events (text deltas included) are delivered as they happen. */
  startTurn(id: SessionId, req: StartTurn, ctx: CallContext): Promise<TurnResult>
  /** Continues a persisted session, loading it if this process has not. */
  resume(id: SessionId, req: ResumeTurn, ctx: CallContext): Promise<TurnResult>
  read(id: SessionId, ctx: CallContext): Promise<SessionView>
  list(q: SessionQuery, ctx: CallContext): Promise<Page<SessionSummary>>
  /**
   * Changes a session's settings (`PATCH`): recorded as a `session_updated` event, effective from
   * the next turn. Anything but metadata is refused (`SESSION_BUSY`) while a turn is open.
   */
  updateSession(id: SessionId, req: UpdateSession, ctx: CallContext): Promise<SessionView>
  /**
   * A new session whose history is this one's up to event `at_seq` (default: the last), with
   * `forked_from` naming it; a turn open at that point is closed in the fork. The source is untouched.
   */
  forkSession(id: SessionId, req: ForkSession, ctx: CallContext): Promise<SessionView>
  /**
   * Changes a session's settings (`PATCH`): recorded as a `session_updated` event, effective from
   * the next turn. Anything but metadata is refused (`SESSION_BUSY`) while a turn is open.
   */
  updateSession(id: SessionId, req: UpdateSession, ctx: CallContext): Promise<SessionView>
  archive(id: SessionId, ctx: CallContext): Promise<void>
  delete(id: SessionId, ctx: CallContext): Promise<void>
  compact(id: SessionId, ctx: CallContext): Promise<CompactionOutcome>
  interrupt(id: SessionId, ctx: CallContext): Promise<InterruptResult>
  /** Stored events with seq > `after` (at most `limit`), from the log or the in-memory buffer. */
  listEvents(id: SessionId, q: { after: number; limit: number }, ctx: CallContext): Promise<EventPage>
  searchMemory(q: MemorySearchQuery, ctx: CallContext): Promise<MemorySearchResult>
  addMemory(entries: MemoryAdd, ctx: CallContext): Promise<MemoryAdded>
  /** The tenant's memory entries in insertion order, a page at a time (optionally one session's, or matching metadata). */
  listMemory(q: MemoryPageQuery, ctx: CallContext): Promise<Page<MemoryItem>>
  /** One memory entry of the tenant; `MEMORY_NOT_FOUND` for an unknown id or another tenant's. */
  getMemory(id: string, ctx: CallContext): Promise<MemoryItem>
  /** Removes one memory entry of the tenant from every index; `MEMORY_NOT_FOUND` as `getMemory`. */
  deleteMemory(id: string, ctx: CallContext): Promise<void>
  /** Session notes: a small key-value map pinned into every LLM call (oldest evicted past 200). */
  listNotes(id: SessionId, ctx: CallContext): Promise<SessionNote[]>
  putNote(id: SessionId, key: string, value: string, ctx: CallContext): Promise<SessionNote>
  /** Throws `SESSION_NOT_FOUND` for an unknown session; a missing key is not an error (returns false). */
  deleteNote(id: SessionId, key: string, ctx: CallContext): Promise<boolean>
  getCapabilities(ctx: CallContext): Promise<Capabilities>
}

/** The one service every surface adapts: the operations plus live streams and process control. */
export interface SessionService extends SessionOperations {
  /** One session's events (`id`), or every session of the caller's tenant (`null`; resumable where the store keeps a tenant journal). */
  subscribe(id: SessionId | null, opts: SubscribeOptions, ctx: CallContext): Promise<EventSubscription>
  /** A short-lived token no wider than the caller's credential (`POST /v1/tokens`). */
  createToken(req: TokenRequest, ctx: CallContext): Promise<AccessToken>
  /** Resolves the caller's tenant or throws `UNAUTHORIZED` (for surfaces that gate before calling). */
  authenticate(ctx: CallContext): string
  capabilities(): Capabilities
  /** False while starting or shutting down, or while the store refuses writes. */
  ready(): boolean
  /** Why the service is or is not ready (`/readyz`): recovers by itself when the store takes writes again. */
  readiness(): 'ready' | 'shutting_down' | 'store_unavailable'
  /** Stops new work, lets running turns finish within `graceMs`, then interrupts them; closes streams. */
  shutdown(graceMs: number): Promise<void>
}

export type { SessionStatus }
