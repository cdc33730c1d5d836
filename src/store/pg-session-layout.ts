import type { EventEnvelope } from '../core/events.js'
import type { Message } from '../core/messages.js'
import type { SessionConfig, SessionNote, SessionRecord } from '../core/session-record.js'
import {
  historyPartJson,
  replacesHistory,
  resolveHistoryPart,
  scalarState,
  usageChunk,
  usageTailStart,
  type HistoryPart,
  type ScalarState,
  type TurnUsage,
} from './stored-history.js'

// How a session is laid out in PostgreSQL (schema 4, docs/scaling.md): the `sessions` row holds a
// small head (the record's scalar state and the usage of its last turns), the configuration and the
// notes; the history lives with the events — each commit's first `events` row carries, in `m`, the
// messages that commit appended (stored-history.ts), and `messages_from` names the row from which
// the current history is read; earlier turns' usage sits in `session_usage` chunks. A commit writes
// the size of what it adds, not of the session. `message_count` and `generation` are columns as
// well as parts of the record: an appending commit's statement checks them, and PostgreSQL's json
// operators cannot read a head whose text holds an escaped NUL.

/** The record's scalar state, as stored in `sessions.head`. */
export type PgHead = ScalarState & {
  history_generation: number
  /** Usage of the turns of the last chunk (the one still filling). */
  usage_tail: TurnUsage[]
}

/** What one write stores beside the events, serialized. */
export interface CommitParts {
  head: string
  /** The history is stored whole with these events (the session's first commit, a compaction, a rolled-back turn). */
  whole: boolean
  /** Messages of the stored history these events extend (what the row must say it holds, unless `whole`). */
  from: number
  /** The first event row's `m`: the messages appended, or null when there are none. */
  part: string | null
  /** The notes, when these events changed them. */
  notes: string | null
  /** The configuration, when these events changed it (`session_updated`). */
  config: string | null
  /** Usage chunks the head has left or these events changed: chunk numbers and their rows. */
  usageChunks: number[]
  usageRows: string[]
}

/** Serializes what storing `events` (consecutive, first commit or following the stored log) and the record after them takes. */
export function commitParts(events: readonly EventEnvelope[], s: SessionRecord): CommitParts {
  const first = events[0]!.seq
  const whole = first === 1 || replacesHistory(events)
  // Messages this batch appended carry seqs from its first event on; every earlier one a smaller seq.
  let from = s.messages.length
  if (whole) from = 0
  else while (from > 0 && s.message_seqs[from - 1]! >= first) from--
  const usage = s.usage_by_turn
  const tailStart = usageTailStart(usage)
  // A turn's usage changes only through its own events (events outside turns, numbered 0, change
  // none); the chunk before the batch's first turn may still be the stored head's tail, so it is
  // written too once the tail has moved on.
  let minTurn = Infinity
  for (const e of events) if (e.turn > 0) minTurn = Math.min(minTurn, e.turn)
  const chunks =
    minTurn === Infinity ? { usageChunks: [], usageRows: [] } : usageChunkRows(usage, tailStart, usageChunk(Math.max(1, minTurn - 1)))
  return {
    head: JSON.stringify(pgHeadOf(s, tailStart)),
    whole,
    from,
    part: from < s.messages.length || whole ? historyPartJson(events, s, from) : null,
    notes: first === 1 || events.some((e) => e.type === 'note_set' || e.type === 'note_deleted') ? JSON.stringify(s.notes) : null,
    config: events.some((e) => e.type === 'session_updated') ? JSON.stringify(s.config) : null,
    ...chunks,
  }
}

/** The `session_usage` rows of the chunks from `firstChunk` up to the tail (which starts at `tailStart`). */
export function usageChunkRows(
  usage: readonly TurnUsage[],
  tailStart: number,
  firstChunk: number,
): { usageChunks: number[]; usageRows: string[] } {
  const usageChunks: number[] = []
  const usageRows: string[] = []
  // From the tail back to the first chunk written: the work is that of the chunks written, not of the session's turns.
  let i = tailStart
  while (i > 0 && usageChunk(usage[i - 1]!.turn) >= firstChunk) i--
  while (i < tailStart) {
    const c = usageChunk(usage[i]!.turn)
    const rows: TurnUsage[] = []
    while (i < tailStart && usageChunk(usage[i]!.turn) === c) rows.push(usage[i++]!)
    usageChunks.push(c)
    usageRows.push(JSON.stringify(rows))
  }
  return { usageChunks, usageRows }
}

/** The head of a record: its scalar state, its history's generation and the usage of its last chunk of turns. */
export function pgHeadOf(r: SessionRecord, tailStart: number): PgHead {
  return { ...scalarState(r), history_generation: r.history_generation, usage_tail: r.usage_by_turn.slice(tailStart) }
}

/** A session's row as `assembleRecord` reads it ($1: the session id). */
export const SESSION_ROW_SQL = `SELECT s.tenant, s.head, s.config, s.notes, s.messages_from, s.message_count, s.last_seq,
  (SELECT json_agg(u.usage ORDER BY u.chunk) FROM session_usage u WHERE u.tenant = s.tenant AND u.session_id = s.session_id) AS usage
  FROM sessions s WHERE s.session_id = $1 LIMIT 1`
/** The rows holding the current history's parts, and the events their messages refer to ($1 tenant, $2 session, $3 messages_from, $4 last_seq). */
export const HISTORY_SQL = `SELECT seq, type, data, m FROM events
  WHERE tenant = $1 AND session_id = $2 AND seq >= $3 AND seq <= $4 AND (m IS NOT NULL OR type IN ('turn_started', 'assistant_message'))
  ORDER BY seq`
/** A `sessions` row as the loader reads it. */
export interface StoredSessionRow {
  head: PgHead
  config: SessionConfig
  notes: SessionNote[]
  message_count: number
  /** Every `session_usage` row's usage, in chunk order. */
  usage: TurnUsage[][] | null
}

/** An `events` row from `messages_from` on that holds a history part or a message the parts refer to. */
export interface StoredHistoryRow {
  seq: number
  type: string
  data: unknown
  m: HistoryPart | null
}

/** `HISTORY_SQL`'s rows as `assembleRecord` takes them. */
export function historyRows(rows: ReadonlyArray<Record<string, unknown>>): StoredHistoryRow[] {
  return rows.map((e) => ({ seq: Number(e.seq), type: e.type as string, data: e.data, m: e.m as HistoryPart | null }))
}

/** The record a stored session holds: its row and its history rows, in seq order. */
export function assembleRecord(sid: string, row: StoredSessionRow, rows: readonly StoredHistoryRow[]): SessionRecord {
  const bySeq = new Map<number, StoredHistoryRow>()
  for (const r of rows) bySeq.set(r.seq, r)
  const messages: Message[] = []
  const seqs: number[] = []
  const turns: number[] = []
  for (const r of rows) {
    if (!r.m) continue
    const part = resolveHistoryPart(r.m, (k) => bySeq.get(r.seq + k))
    if (part.i !== messages.length) throw new Error(`the stored history of ${sid} has a hole at message ${messages.length}`)
    for (let i = 0; i < part.m.length; i++) {
      messages.push(part.m[i]!)
      seqs.push(part.s[i]!)
      turns.push(part.t[i]!)
    }
  }
  if (messages.length !== row.message_count)
    throw new Error(`the stored history of ${sid} holds ${messages.length} messages, its head ${row.message_count}`)
  const { usage_tail: tail, ...head } = row.head
  // Chunks the head's tail still covers (a session upgraded from schema 3 keeps all its usage there) are skipped.
  const tailChunk = tail.length > 0 ? usageChunk(tail[0]!.turn) : Infinity
  const usage: TurnUsage[] = []
  for (const chunk of row.usage ?? []) for (const u of chunk) if (usageChunk(u.turn) < tailChunk) usage.push(u)
  for (const u of tail) usage.push(u)
  return {
    session_id: sid,
    ...head,
    config: row.config,
    notes: row.notes,
    messages,
    message_seqs: seqs,
    message_turns: turns,
    usage_by_turn: usage,
  }
}
