import type { EventEnvelope } from '../core/events.js'
import type { ForkOrigin, SessionRecord } from '../core/session-record.js'
import { closingEvents } from './close-turn.js'
import { applyEvent } from './session-reducer.js'

/**
 * The log of a fork: the source's events up to `origin.seq`, copied under the new session's id
 * (same seqs, so every seq a copied event names — a compaction's discarded range, a rejected
 * turn's — still means the same event), with `forked_from` on its `session_created` and every
 * `at` the fork's time. What the source did to itself without touching its history stays behind:
 * its archiving (and whatever followed it). A turn open at that point — running, paused for
 * client tools, between a compaction's start and end — is closed as crash recovery closes one
 * (`closingEvents`), so the fork's history is valid for a provider and takes its next turn.
 */
export function forkLog(source: readonly EventEnvelope[], id: string, at: string, origin: ForkOrigin): EventEnvelope[] {
  const out: EventEnvelope[] = []
  for (const e of source) {
    if (e.seq > origin.seq || e.type === 'session_archived') break
    if (e.type === 'text_delta') continue
    const data =
      e.type === 'session_created'
        ? {
            ...(e as EventEnvelope<'session_created'>).data,
            config: { ...(e as EventEnvelope<'session_created'>).data.config, forked_from: origin },
          }
        : e.data
    out.push({ ...e, session_id: id, at, data } as EventEnvelope)
  }
  let record: SessionRecord | undefined
  for (const e of out) record = applyEvent(record, e)
  if (!record) throw new Error(`the source log of ${origin.session_id} does not start with session_created`)
  let seq = record.last_seq
  const turn = record.open_turn?.turn ?? 0
  for (const p of closingEvents(record, 'INTERRUPTED', 'The session was forked while this turn was open.', 'forked'))
    out.push({ seq: ++seq, session_id: id, turn, type: p.type, at, data: p.data } as EventEnvelope)
  return out
}
