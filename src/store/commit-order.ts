import type { EventEnvelope } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'

/**
 * Why a commit cannot follow the session's log (undefined when it can): its events must be the
 * session's, with consecutive seqs from `next`, and its snapshot must be at the last of them.
 * The check every repository's write path makes before queueing a commit.
 */
export function commitOrderError(events: readonly EventEnvelope[], snapshot: SessionRecord, next: number): Error | undefined {
  const sid = snapshot.session_id
  let expected = next
  for (const e of events) {
    if (e.session_id !== sid || e.seq !== expected)
      return new Error(`commit out of order for ${sid}: expected seq ${expected}, got ${e.seq}`)
    expected++
  }
  if (snapshot.last_seq !== expected - 1) return new Error(`snapshot of ${sid} is at seq ${snapshot.last_seq}, log at ${expected - 1}`)
  return undefined
}
