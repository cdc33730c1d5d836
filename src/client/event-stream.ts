/**
 * Event streams over SSE (`GET /v1/sessions/{id}/events`, `GET /v1/events`) as an async
 * iterator that survives disconnects.
 *
 * - Yields each frame as the core's `StreamFrame`: `{ kind: 'event', event }` for envelopes
 *   (text deltas included), `{ kind: 'control', control }` for `stream_truncated` / `stream_closed`.
 * - On a dropped connection (or a 429 / 500 / 503 answer, or no byte for `idleTimeoutMs`) it
 *   waits the server's `retry:` delay (1 s until told otherwise) and reconnects, sending
 *   `Last-Event-ID` = the last stored seq it yielded, so a session stream replays what it
 *   missed; it never yields a stored seq twice. Any other refusal (401, 404, …) is thrown as
 *   a `BurrowError`.
 * - Ends when you break out of the loop, when `signal` aborts, or after yielding a
 *   `stream_closed` frame with reason `session_deleted`. Other `stream_closed` frames
 *   (`slow_consumer`, `shutdown`) are yielded and followed by a reconnection.
 * - The tenant stream (`null`) resumes too where the server keeps a tenant journal (LMDB,
 *   PostgreSQL): frames carry the stream id in `id`, and a reconnection sends the last one as
 *   `Last-Event-ID`. Where it does not (no store), the server answers the reconnection with
 *   `stream_truncated` (`live_only`) and it goes on live.
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser'
import { BurrowError } from '../core/errors.js'
import type { EventEnvelope } from '../core/events.js'
import type { StreamControl, StreamFrame } from '../core/session-service.js'
import { responseError, sleep, type Transport } from './transport.js'

/** One item of an event stream: an envelope or a control frame. */
export type StreamItem = StreamFrame

export interface ReconnectInfo {
  /** Reconnection number, from 1. */
  attempt: number
  /** The `Last-Event-ID` the reconnection sends (undefined: none). */
  lastEventId: number | undefined
  /** Why the previous connection ended (undefined: the server closed it cleanly). */
  error: unknown
  /** The wait before reconnecting, ms. */
  delayMs: number
}

export interface EventStreamOptions {
  /** Replay stored events with seq (tenant stream: stream id) > `after`, then tail. Undefined: live only. */
  after?: number | undefined
  /** Aborting ends the iteration (and closes the connection). */
  signal?: AbortSignal | undefined
  /** Overrides the client's API key for this stream. */
  apiKey?: string | undefined
  /** Reconnect delay until the server sends `retry:` (default 1000 ms). */
  retryMs?: number | undefined
  /** Reconnect when nothing (not even a heartbeat) arrives for this long (default 45 000 ms; 0 = never). */
  idleTimeoutMs?: number | undefined
  /** Called before each reconnection (for logging and tests). */
  onReconnect?: ((info: ReconnectInfo) => void) | undefined
}

const RETRYABLE = new Set(['RATE_LIMITED', 'SHUTTING_DOWN', 'INTERNAL'])

class IdleTimeout extends Error {
  constructor(ms: number) {
    super(`no data for ${ms} ms`)
    this.name = 'IdleTimeout'
  }
}

export async function* eventStream(
  t: Transport,
  sessionId: string | null,
  opts: EventStreamOptions = {},
): AsyncGenerator<StreamItem, void, undefined> {
  const { signal } = opts
  const path = sessionId === null ? '/v1/events' : `/v1/sessions/${encodeURIComponent(sessionId)}/events`
  const url = t.url(path, { after: opts.after })
  const idleMs = opts.idleTimeoutMs ?? 45_000
  let retryMs = opts.retryMs ?? 1000
  /** Session streams: the last stored seq yielded (or the requested `after`). */
  let lastSeq = sessionId === null ? undefined : opts.after
  /** The tenant stream: the last stream id yielded (or the requested `after`). */
  let lastId = sessionId === null ? opts.after : undefined
  /** Tenant streams: the last stored seq yielded per session. */
  const lastBySession = new Map<string, number>()
  let attempt = 0
  let lastError: unknown
  let waitMs = 0

  while (!signal?.aborted) {
    if (attempt > 0) {
      const delayMs = Math.max(retryMs, waitMs)
      opts.onReconnect?.({ attempt, lastEventId: sessionId === null ? lastId : lastSeq, error: lastError, delayMs })
      await sleep(delayMs, signal)
      if (signal?.aborted) return
    }
    attempt++
    lastError = undefined
    waitMs = 0
    const conn = new AbortController()
    const onAbort = () => conn.abort(signal?.reason)
    signal?.addEventListener('abort', onAbort, { once: true })
    let idle: NodeJS.Timeout | undefined
    const arm = () => {
      if (idleMs <= 0) return
      clearTimeout(idle)
      idle = setTimeout(() => conn.abort(new IdleTimeout(idleMs)), idleMs)
    }
    try {
      const headers = t.headers({ apiKey: opts.apiKey }, { accept: 'text/event-stream' })
      const resumeAt = sessionId === null ? lastId : lastSeq
      if (resumeAt !== undefined) headers['last-event-id'] = String(resumeAt)
      let res: Response
      try {
        arm()
        res = await t.raw(url, { method: 'GET', headers, signal: conn.signal })
      } catch (err) {
        lastError = err
        continue
      }
      if (!res.ok) {
        const err = await responseError(res)
        if (!RETRYABLE.has(err.code)) throw err
        lastError = err
        waitMs = retryAfterMs(res)
        continue
      }
      if (!String(res.headers.get('content-type') ?? '').startsWith('text/event-stream') || !res.body) {
        throw new BurrowError('INTERNAL', `${path} did not answer with an event stream.`, { transport: 'protocol', status: res.status })
      }
      const queue: StreamItem[] = []
      const parser = createParser({
        onEvent: (m) => queue.push(frameOf(m, sessionId === null)),
        onRetry: (ms) => {
          retryMs = ms
        },
      })
      const reader = res.body.getReader()
      const decoder = new TextDecoder()
      for (;;) {
        let chunk: Awaited<ReturnType<typeof reader.read>>
        try {
          arm()
          chunk = await reader.read()
        } catch (err) {
          lastError = err
          break
        }
        if (chunk.done) break
        parser.feed(decoder.decode(chunk.value, { stream: true }))
        for (const f of queue.splice(0)) {
          if (f.kind === 'event' && f.event.type !== 'text_delta') {
            const e = f.event
            if (sessionId !== null) {
              if (lastSeq !== undefined && e.seq <= lastSeq) continue
              lastSeq = e.seq
            } else {
              const last = lastBySession.get(e.session_id)
              if (last !== undefined && e.seq <= last) continue
              lastBySession.set(e.session_id, e.seq)
              if (typeof f.id === 'number') lastId = f.id
            }
          }
          yield f
          if (f.kind === 'control' && f.control.type === 'stream_closed' && f.control.data.reason === 'session_deleted') return
        }
      }
    } finally {
      clearTimeout(idle)
      signal?.removeEventListener('abort', onAbort)
      conn.abort()
    }
  }
}

function frameOf(m: EventSourceMessage, tenant: boolean): StreamItem {
  let data: unknown
  try {
    data = JSON.parse(m.data)
  } catch (err) {
    throw new BurrowError(
      'INTERNAL',
      `An event stream frame (${m.event ?? 'message'}) is not JSON.`,
      { transport: 'protocol' },
      { cause: err },
    )
  }
  if (m.event === 'stream_truncated' || m.event === 'stream_closed') return { kind: 'control', control: data as StreamControl }
  // A stored event's id is its seq on a session stream; on the tenant stream, its stream id (kept on the frame).
  const id = tenant && m.id ? Number(m.id) : NaN
  return Number.isSafeInteger(id) ? { kind: 'event', event: data as EventEnvelope, id } : { kind: 'event', event: data as EventEnvelope }
}

function retryAfterMs(res: Response): number {
  const s = Number(res.headers.get('retry-after'))
  return Number.isFinite(s) && s > 0 ? Math.min(s, 300) * 1000 : 0
}
