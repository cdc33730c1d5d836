/**
 * The typed HTTP client: the service's operations over the REST + SSE surface, so code
 * written against `SessionOperations` runs in-process or remotely unchanged.
 *
 * Every method throws only `BurrowError` (see ./transport.ts for how wire failures map),
 * except that an exception thrown by your own `ctx.onEvent` propagates as is.
 * `ctx` is optional: `apiKey` overrides the client's key, `idempotencyKey` becomes the
 * `Idempotency-Key` header, `requestId` the `X-Request-Id` header.
 */
import { BurrowError } from '../core/errors.js'
import type { SessionId } from '../core/ids.js'
import type { SessionNote } from '../core/session-record.js'
import type { EventPage, SessionOperations } from '../core/session-service.js'
import type {
  AccessToken,
  Capabilities,
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
  SessionSummary,
  SessionView,
  StartTurn,
  TokenRequest,
  TurnResult,
  UpdateSession,
  ForkSession,
} from '../core/wire.js'
import { eventStream, type EventStreamOptions, type StreamItem } from './event-stream.js'
import { Transport, transportError, type BurrowClientOptions, type ClientCallContext } from './transport.js'
import { readTurnStream } from './turn-stream.js'

const seg = (s: string) => encodeURIComponent(s)

export class BurrowClient implements SessionOperations {
  private readonly t: Transport

  constructor(opts: BurrowClientOptions) {
    this.t = new Transport(opts)
  }

  get baseUrl(): string {
    return this.t.baseUrl
  }

  createSession(req: CreateSession = {}, ctx: ClientCallContext = {}): Promise<SessionCreated> {
    return this.t.json(ctx, { method: 'POST', path: '/v1/sessions', body: req })
  }

  /**
   * Runs a turn (`input`) or continues a paused one (`tool_results`). With `ctx.onEvent` the
   * turn is streamed: every envelope (text deltas included) is delivered as it arrives and
   * the result is rebuilt from the events (see ./turn-stream.ts); a `turn_failed` event
   * rejects with a `BurrowError` of its code.
   */
  startTurn(id: SessionId, req: StartTurn, ctx: ClientCallContext = {}): Promise<TurnResult> {
    return this.turn(id, 'turns', req, ctx)
  }

  /** Continues a persisted session (also after a server restart); same body and streaming as `startTurn`. */
  resume(id: SessionId, req: ResumeTurn, ctx: ClientCallContext = {}): Promise<TurnResult> {
    return this.turn(id, 'resume', req, ctx)
  }

  read(id: SessionId, ctx: ClientCallContext = {}): Promise<SessionView> {
    return this.t.json(ctx, { method: 'GET', path: `/v1/sessions/${seg(id)}` })
  }

  /** Newest first; filters by status, metadata (every pair) and creation or last-activity time. */
  list(q: SessionQuery = {}, ctx: ClientCallContext = {}): Promise<Page<SessionSummary>> {
    const { metadata, ...rest } = q
    return this.t.json(ctx, { method: 'GET', path: '/v1/sessions', query: { ...rest, ...metadataQuery(metadata) } })
  }

  /** A new session whose history is this one's up to `at_seq` (default: now); the source is untouched. */
  forkSession(id: SessionId, req: ForkSession = {}, ctx: ClientCallContext = {}): Promise<SessionView> {
    return this.t.json(ctx, { method: 'POST', path: `/v1/sessions/${seg(id)}/fork`, body: req })
  }

  /** Changes metadata (merged; null removes a key), system prompt, tools or compaction settings, from the next turn. */
  updateSession(id: SessionId, req: UpdateSession, ctx: ClientCallContext = {}): Promise<SessionView> {
    return this.t.json(ctx, { method: 'PATCH', path: `/v1/sessions/${seg(id)}`, body: req })
  }

  async archive(id: SessionId, ctx: ClientCallContext = {}): Promise<void> {
    await this.t.json(ctx, { method: 'POST', path: `/v1/sessions/${seg(id)}/archive` })
  }

  async delete(id: SessionId, ctx: ClientCallContext = {}): Promise<void> {
    await this.t.json(ctx, { method: 'DELETE', path: `/v1/sessions/${seg(id)}` })
  }

  compact(id: SessionId, ctx: ClientCallContext = {}): Promise<CompactionOutcome> {
    return this.t.json(ctx, { method: 'POST', path: `/v1/sessions/${seg(id)}/compact` })
  }

  interrupt(id: SessionId, ctx: ClientCallContext = {}): Promise<InterruptResult> {
    return this.t.json(ctx, { method: 'POST', path: `/v1/sessions/${seg(id)}/interrupt` })
  }

  /** A page of stored events with seq > `after` (`GET …/event-log`). */
  listEvents(id: SessionId, q: { after?: number; limit?: number } = {}, ctx: ClientCallContext = {}): Promise<EventPage> {
    return this.t.json(ctx, { method: 'GET', path: `/v1/sessions/${seg(id)}/event-log`, query: { after: q.after, limit: q.limit } })
  }

  searchMemory(q: MemorySearchQuery, ctx: ClientCallContext = {}): Promise<MemorySearchResult> {
    return this.t.json(ctx, {
      method: 'GET',
      path: '/v1/memory/search',
      query: { q: q.q, limit: q.limit, session_id: q.session_id, scope: q.scope, ...metadataQuery(q.metadata) },
    })
  }

  /** A page of the tenant's memory entries, in insertion order (pass `next_cursor` as `cursor` for the next). */
  listMemory(q: MemoryPageQuery = {}, ctx: ClientCallContext = {}): Promise<Page<MemoryItem>> {
    return this.t.json(ctx, {
      method: 'GET',
      path: '/v1/memory',
      query: { limit: q.limit, cursor: q.cursor, session_id: q.session_id, ...metadataQuery(q.metadata) },
    })
  }

  /** One memory entry; throws `MEMORY_NOT_FOUND` for an id the tenant does not have. */
  getMemory(id: string, ctx: ClientCallContext = {}): Promise<MemoryItem> {
    return this.t.json(ctx, { method: 'GET', path: `/v1/memory/${seg(id)}` })
  }

  async deleteMemory(id: string, ctx: ClientCallContext = {}): Promise<void> {
    await this.t.json(ctx, { method: 'DELETE', path: `/v1/memory/${seg(id)}` })
  }

  /**
   * A short-lived, scoped token (`POST /v1/tokens`): for a browser, which should hold this rather
   * than the API key. Called with a token, it refreshes it (never wider, never past its `refresh_until`).
   */
  createToken(req: TokenRequest, ctx: ClientCallContext = {}): Promise<AccessToken> {
    return this.t.json(ctx, { method: 'POST', path: '/v1/tokens', body: req })
  }

  addMemory(entries: MemoryAdd, ctx: ClientCallContext = {}): Promise<MemoryAdded> {
    return this.t.json(ctx, { method: 'POST', path: '/v1/memory', body: entries })
  }

  async listNotes(id: SessionId, ctx: ClientCallContext = {}): Promise<SessionNote[]> {
    return (await this.t.json<{ notes: SessionNote[] }>(ctx, { method: 'GET', path: `/v1/sessions/${seg(id)}/notes` })).notes
  }

  /** One note; throws `NOTE_NOT_FOUND` when the session has none with this key. */
  getNote(id: SessionId, key: string, ctx: ClientCallContext = {}): Promise<SessionNote> {
    return this.t.json(ctx, { method: 'GET', path: `/v1/sessions/${seg(id)}/notes/${seg(key)}` })
  }

  putNote(id: SessionId, key: string, value: string, ctx: ClientCallContext = {}): Promise<SessionNote> {
    return this.t.json(ctx, { method: 'PUT', path: `/v1/sessions/${seg(id)}/notes/${seg(key)}`, body: { value } })
  }

  /**
   * Deletes a note; resolves whether it existed. `DELETE …/notes/{key}` answers 204 either
   * way, so existence is read first (`GET …/notes/{key}`): a note set or deleted by someone
   * else between the two requests can make the answer stale.
   */
  async deleteNote(id: SessionId, key: string, ctx: ClientCallContext = {}): Promise<boolean> {
    let existed = true
    try {
      await this.getNote(id, key, { ...ctx, idempotencyKey: undefined })
    } catch (err) {
      if (!(err instanceof BurrowError) || err.code !== 'NOTE_NOT_FOUND') throw err
      existed = false
    }
    await this.t.json(ctx, { method: 'DELETE', path: `/v1/sessions/${seg(id)}/notes/${seg(key)}` })
    return existed
  }

  getCapabilities(ctx: ClientCallContext = {}): Promise<Capabilities> {
    return this.t.json(ctx, { method: 'GET', path: '/v1/capabilities' })
  }

  /**
   * A session's events (`sessionId`), or every session's of the caller's tenant (`null`,
   * live only), as an async iterator that reconnects; see ./event-stream.ts.
   */
  events(sessionId: SessionId | null, opts: EventStreamOptions = {}): AsyncGenerator<StreamItem, void, undefined> {
    return eventStream(this.t, sessionId, opts)
  }

  private async turn(id: SessionId, route: 'turns' | 'resume', req: StartTurn, ctx: ClientCallContext): Promise<TurnResult> {
    const path = `/v1/sessions/${seg(id)}/${route}`
    const asJson = () => this.t.json<TurnResult>({ ...ctx, onEvent: undefined, onQueued: undefined }, { method: 'POST', path, body: req })
    // Streamed when the caller watches the turn's events or its place in the session's line.
    if (!ctx.onEvent && !ctx.onQueued) return asJson()
    const onEvent = ctx.onEvent ?? (() => undefined)
    const res = await this.t.send(ctx, { method: 'POST', path, body: req, accept: 'text/event-stream' })
    if (!String(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
      return (await res.json()) as TurnResult // a server without SSE on this route answered JSON
    }
    const { outcome, assembler, broken } = await readTurnStream(res, onEvent, ctx.onQueued)
    if (outcome?.kind === 'failed') throw outcome.error
    if (outcome && !(assembler.continuation && ctx.idempotencyKey)) return outcome.result
    // The stream broke or ended mid-turn, or a continuation's stream started mid-turn:
    // with a key the server answers with the turn's exact result (waiting for it if needed).
    if (ctx.idempotencyKey) return asJson()
    if (broken !== undefined) throw transportError(broken, 'POST', path, this.t.opts.timeoutMs)
    throw new BurrowError('INTERNAL', `The turn stream of ${path} ended before the turn did; its outcome is unknown.`, {
      transport: 'stream',
    })
  }
}

/** A metadata filter as the REST query parameters `metadata.KEY=VALUE`. */
function metadataQuery(m: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(m ?? {}).map(([k, v]) => [`metadata.${k}`, v]))
}
