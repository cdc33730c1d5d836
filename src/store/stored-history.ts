import { INPUT_REJECTED, type EventData, type EventEnvelope } from '../core/events.js'
import type { Message } from '../core/messages.js'
import type { SessionRecord, TokenTotals } from '../core/session-record.js'

// How both durable stores keep a session's history without rewriting it on every commit: each
// commit stores, beside its events, only the history messages its events appended (or the whole
// history when a compaction or a rolled-back turn replaced it), and a small head. Loading reads the
// parts from the last whole one on. Turn usage goes in chunks of USAGE_CHUNK turns, the last one in
// the head. The LMDB layout (lmdb-layout.ts) and the PostgreSQL one (pg-session-layout.ts) share this.

export type TurnUsage = TokenTotals & { turn: number }

/**
 * The history messages one commit appended, as stored with its events: `i` is the index of the
 * first (0 when the commit stored the whole history). A message that is an event's own content in
 * the same commit — the user input of a `turn_started`, the message of an `assistant_message` — is
 * stored as `{ r: k }`, the k-th event of the commit.
 */
export interface HistoryPart {
  i: number
  m: Array<Message | { r: number }>
  s: number[]
  t: number[]
}

/**
 * The part's JSON for the messages `s.messages[from…]` appended by `events` (which follow one
 * another; none: every message is stored in full).
 */
export function historyPartJson(events: readonly EventEnvelope[], s: SessionRecord, from: number): string {
  const first = events.length > 0 ? events[0]!.seq : Infinity
  const parts: string[] = []
  for (let i = from; i < s.messages.length; i++) {
    const msg = s.messages[i]!
    const k = s.message_seqs[i]! - first
    const e = k >= 0 && k < events.length ? events[k]! : undefined
    const own =
      e !== undefined &&
      (e.type === 'assistant_message'
        ? (e.data as EventData['assistant_message']).message === msg
        : e.type === 'turn_started' && msg.role === 'user' && msg.content === (e.data as EventData['turn_started']).input)
    parts.push(own ? `{"r":${k}}` : JSON.stringify(msg))
  }
  return `{"i":${from},"m":[${parts.join(',')}],"s":${JSON.stringify(s.message_seqs.slice(from))},"t":${JSON.stringify(s.message_turns.slice(from))}}`
}

/** A stored part with its references resolved; `eventAt(k)` is the k-th event of the part's commit. */
export function resolveHistoryPart(
  part: HistoryPart,
  eventAt: (k: number) => { type: string; data: unknown } | undefined,
): { i: number; m: Message[]; s: number[]; t: number[] } {
  const m = part.m.map((x) => {
    if (!('r' in x)) return x
    const e = eventAt(x.r)
    if (e?.type === 'assistant_message') return (e.data as EventData['assistant_message']).message
    if (e?.type === 'turn_started') return { role: 'user' as const, content: (e.data as EventData['turn_started']).input! }
    throw new Error(`a stored history message refers to event ${x.r} of its commit, which holds no message`)
  })
  return { i: part.i, m, s: part.s, t: part.t }
}

/** Whether these events replace the history rather than append to it (a commit then stores it whole). */
export function replacesHistory(events: readonly EventEnvelope[]): boolean {
  return events.some(
    (e) =>
      e.type === 'compaction_completed' ||
      // session-reducer.ts rolls back the messages of a turn whose input the provider rejected.
      (e.type === 'turn_failed' && (e.data as EventData['turn_failed']).reason === INPUT_REJECTED),
  )
}

/** Turns per stored usage chunk (`chunk` = usage of turns chunk·N+1 … chunk·N+N). */
export const USAGE_CHUNK = 16

export function usageChunk(turn: number): number {
  return Math.floor((turn - 1) / USAGE_CHUNK)
}

/** Index in `usage` (ordered by turn) where the last chunk — the one still filling, kept in the head — starts. */
export function usageTailStart(usage: readonly TurnUsage[]): number {
  let i = usage.length
  if (i > 0) {
    const tail = usageChunk(usage[i - 1]!.turn)
    while (i > 0 && usageChunk(usage[i - 1]!.turn) === tail) i--
  }
  return i
}

/** A record's scalar state: what both stores keep in a session's head, beside their own bookkeeping. */
export type ScalarState = Omit<
  SessionRecord,
  'session_id' | 'config' | 'notes' | 'messages' | 'message_seqs' | 'message_turns' | 'usage_by_turn' | 'history_generation'
>

/** The scalar state of a record, named field by field (cheaper than copying the record and deleting). */
export function scalarState(r: SessionRecord): ScalarState {
  return {
    created_at: r.created_at,
    updated_at: r.updated_at,
    status: r.status,
    turn_count: r.turn_count,
    last_seq: r.last_seq,
    usage: r.usage,
    tool_stats: r.tool_stats,
    open_turn: r.open_turn,
    last_input_tokens: r.last_input_tokens,
    history_chars: r.history_chars,
    session_boundary_index: r.session_boundary_index,
    last_compaction_boundary_index: r.last_compaction_boundary_index,
    compactions: r.compactions,
  }
}
