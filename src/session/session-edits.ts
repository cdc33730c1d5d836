import { v7 as uuidv7 } from 'uuid'
import { BurrowError, invalidRequest, storeUnavailable } from '../core/errors.js'
import type { EventStore } from '../core/stores.js'
import { toView } from '../core/views.js'
import type { SessionView, UpdateSession } from '../core/wire.js'
import type { EventHub } from './event-hub.js'
import type { Receipt } from './idempotency.js'
import { forkLog } from './fork.js'
import type { LiveSession } from './live-session.js'
import type { LiveSessions } from './live-sessions.js'
import { sessionChanges, type SessionConfigRules } from './turn-requests.js'

// What `PATCH /v1/sessions/{id}` and `POST …/fork` do once the caller is checked (local-session-service.ts).

/**
 * Forks `source` after event `atSeq` (default: its last): reads its log up to there, commits the
 * fork's whole log as one write, publishes it, and answers the fork's view.
 */
export async function forkSession(
  parts: { sessions: LiveSessions; events: EventStore; hub: EventHub },
  source: LiveSession,
  atSeq: number | undefined,
  receipt: Receipt | null = null,
): Promise<SessionView> {
  const last = source.record.last_seq
  const at = atSeq ?? last
  if (at > last) throw invalidRequest('body/at_seq', `is past the session's last event (${last})`)
  const origin = { session_id: source.id, seq: at }
  const events = forkLog(await parts.events.readAfter(source.id, 0, at), uuidv7(), new Date().toISOString(), origin)
  let view!: SessionView
  try {
    await parts.sessions.createFrom(events, (fork) => {
      view = toView(fork.record, false)
      return receipt?.seal({ ok: true, value: view })
    })
  } catch (err) {
    throw storeUnavailable(err, 'the fork')
  }
  for (const e of events) parts.hub.publish(e)
  return view
}

/**
 * Records what `req` changes as `session_updated` (nothing when it changes nothing) and answers
 * the view. Runs inside the session's exclusive section: no turn starts meanwhile.
 */
export async function updateSession(
  sessions: LiveSessions,
  s: LiveSession,
  req: UpdateSession,
  rules: SessionConfigRules,
  receipt: Receipt | null = null,
): Promise<SessionView> {
  if (s.record.status === 'archived') throw new BurrowError('SESSION_ARCHIVED', `Session ${s.id} is archived.`)
  const changes = sessionChanges(s.record.config, req, rules)
  const settings = Object.keys(changes).filter((k) => k !== 'metadata')
  if (settings.length > 0 && (s.running || s.record.open_turn))
    throw new BurrowError(
      'SESSION_BUSY',
      `A turn is open on session ${s.id}: ${settings.join(', ')} can change once it has ended (metadata can change at any time).`,
    )
  if (Object.keys(changes).length === 0) return toView(s.record, s.active)
  let view!: SessionView
  s.emit(s.record.turn_count, [{ type: 'session_updated', data: { changes } }], () => {
    view = toView(s.record, s.active)
    return receipt?.seal({ ok: true, value: view })
  })
  await sessions.settle(s)
  return view
}
