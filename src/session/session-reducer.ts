import { SUMMARY_PREFIX } from '../core/compactor.js'
import { INPUT_REJECTED, type EventEnvelope, type EventData } from '../core/events.js'
import type { Message, ToolResultBlock } from '../core/messages.js'
import { toolUsesOf } from '../core/messages.js'
import { NOTES_MAX, type SessionRecord, type TokenTotals } from '../core/session-record.js'

/**
 * The only code that changes a session's state: the live path and a rebuild from
 * the log both fold events through it, so `rebuild(log) == live record` by construction.
 * Pure apart from mutating `record`; `text_delta` is ignored.
 */
export function applyEvent(record: SessionRecord | undefined, e: EventEnvelope): SessionRecord {
  if (e.type === 'session_created') return created(e as EventEnvelope<'session_created'>)
  if (!record) throw new Error(`event ${e.type} before session_created`)
  if (e.type === 'text_delta') return record
  if (e.seq !== record.last_seq + 1) throw new Error(`seq gap: ${record.last_seq} -> ${e.seq}`)
  record.last_seq = e.seq
  record.updated_at = e.at
  switch (e.type) {
    case 'turn_started':
      turnStarted(record, e as EventEnvelope<'turn_started'>)
      break
    case 'assistant_message':
      assistantMessage(record, e as EventEnvelope<'assistant_message'>)
      break
    case 'tool_call': {
      const d = e.data as EventData['tool_call']
      const s = (record.tool_stats[d.name] ??= { calls: 0, failures: 0 })
      s.calls++
      break
    }
    case 'tool_result':
      toolResult(record, e as EventEnvelope<'tool_result'>)
      break
    case 'turn_requires_action':
      if (record.open_turn) {
        record.open_turn.state = 'requires_action'
        delete record.open_turn.request // the pause is that request's outcome
      }
      break
    case 'turn_completed':
      record.open_turn = null
      break
    case 'turn_failed': {
      if ((e.data as EventData['turn_failed']).reason === INPUT_REJECTED && record.open_turn) rollBack(record, record.open_turn.first_seq)
      record.open_turn = null
      break
    }
    case 'session_archived':
      record.status = 'archived'
      break
    case 'compaction_completed':
      compacted(record, e as EventEnvelope<'compaction_completed'>)
      break
    case 'note_set': {
      const d = e.data as EventData['note_set']
      record.notes = record.notes.filter((n) => n.key !== d.key)
      record.notes.push({ key: d.key, value: d.value, updated_at: e.at })
      if (record.notes.length > NOTES_MAX) record.notes.splice(0, record.notes.length - NOTES_MAX) // oldest first out
      break
    }
    case 'session_updated':
      Object.assign(record.config, structuredClone((e.data as EventData['session_updated']).changes))
      break
    case 'note_deleted': {
      const key = (e.data as EventData['note_deleted']).key
      record.notes = record.notes.filter((n) => n.key !== key)
      break
    }
    case 'compaction_failed': {
      // The loop guard counts from the last attempt, so a failing summariser is not retried on every call.
      record.last_compaction_boundary_index = record.session_boundary_index
      const u = (e.data as EventData['compaction_failed']).usage
      if (u) addUsage(record, e.turn, { input_tokens: 0, output_tokens: 0, compaction_tokens: u.input_tokens + u.output_tokens })
      break
    }
    default:
      break
  }
  return record
}

function created(e: EventEnvelope<'session_created'>): SessionRecord {
  if (e.seq !== 1) throw new Error('session_created must be seq 1')
  const d = e.data
  return {
    session_id: e.session_id,
    created_at: e.at,
    updated_at: e.at,
    status: 'active',
    config: structuredClone(d.config),
    messages: [],
    message_seqs: [],
    message_turns: [],
    turn_count: 0,
    last_seq: 1,
    usage: zero(),
    usage_by_turn: [],
    tool_stats: {},
    open_turn: null,
    last_input_tokens: 0,
    history_chars: 0,
    session_boundary_index: 0,
    last_compaction_boundary_index: null,
    compactions: 0,
    history_generation: 0,
    notes: [],
  }
}

function turnStarted(r: SessionRecord, e: EventEnvelope<'turn_started'>): void {
  const d = e.data
  const request = d.idempotency ? { request: { ...d.idempotency, first_seq: e.seq } } : {}
  if (d.continuation) {
    if (r.open_turn) {
      r.open_turn.state = 'running'
      delete r.open_turn.request
      Object.assign(r.open_turn, request)
    }
    return
  }
  r.turn_count = e.turn
  r.usage_by_turn.push({ turn: e.turn, ...zero() })
  r.open_turn = {
    turn: e.turn,
    state: 'running',
    first_seq: e.seq,
    pending_tool_calls: [],
    client_tool_call_ids: [],
    results: [],
    ...(d.settings ? { settings: d.settings } : {}),
    ...request,
  }
  // Events are immutable once emitted, so the record shares their data instead of copying it.
  if (d.input) pushMessage(r, { role: 'user', content: d.input }, e.seq, e.turn)
}

function assistantMessage(r: SessionRecord, e: EventEnvelope<'assistant_message'>): void {
  const d = e.data
  pushMessage(r, d.message, e.seq, e.turn)
  addUsage(r, e.turn, { input_tokens: d.usage.input_tokens, output_tokens: d.usage.output_tokens, compaction_tokens: 0 })
  r.last_input_tokens = d.usage.input_tokens
  r.session_boundary_index++
  if (r.open_turn) {
    r.open_turn.pending_tool_calls = toolUsesOf(d.message).map((b) => ({ id: b.id, name: b.name, input: b.input }))
    r.open_turn.client_tool_call_ids = d.client_tool_call_ids ?? []
    r.open_turn.results = []
  }
}

function toolResult(r: SessionRecord, e: EventEnvelope<'tool_result'>): void {
  const d = e.data
  if (d.is_error) (r.tool_stats[d.name] ??= { calls: 0, failures: 0 }).failures++
  const open = r.open_turn
  if (!open) return
  const block: ToolResultBlock = { type: 'tool_result', tool_use_id: d.tool_call_id, content: d.content as ToolResultBlock['content'] }
  if (d.is_error) block.is_error = true
  open.results.push(block)
  if (open.pending_tool_calls.every((c) => open.results.some((b) => b.tool_use_id === c.id))) {
    // One tool-results message answering the calls in call order, as providers require.
    const ordered = open.pending_tool_calls.map((c) => open.results.find((b) => b.tool_use_id === c.id)!)
    pushMessage(r, { role: 'user', content: ordered }, e.seq, e.turn)
    open.pending_tool_calls = []
    open.client_tool_call_ids = []
    open.results = []
  }
}

function pushMessage(r: SessionRecord, m: Message, seq: number, turn: number): void {
  r.messages.push(m)
  r.message_seqs.push(seq)
  r.message_turns.push(turn)
  r.history_chars += JSON.stringify(m).length
}

/** The message a compaction puts first: the fixed prefix (core/compactor.ts), then the summary. */
export function summaryMessage(summary: string): Message {
  return { role: 'user', content: [{ type: 'text', text: `${SUMMARY_PREFIX}\n${summary}` }] }
}

/** What a compaction takes out of a history: its first messages, in original order, with their seqs and turns. */
export interface Discarded {
  messages: readonly Message[]
  seqs: readonly number[]
  turns: readonly number[]
}

/** What applying `e` to `r` discards (what `compacted` drops), read before it is applied. */
export function discardedBy(r: SessionRecord, e: EventEnvelope<'compaction_completed'>): Discarded {
  const from = r.messages.length - (e.data.messages_after - 1)
  return { messages: r.messages.slice(0, from), seqs: r.message_seqs.slice(0, from), turns: r.message_turns.slice(0, from) }
}

/**
 * Rebuilt history: the summary message (with this event's seq), then the last
 * `messages_after - 1` messages, untouched. The old array is replaced, not mutated,
 * so anyone holding it (a provider's size cache) sees a new history.
 */
function compacted(r: SessionRecord, e: EventEnvelope<'compaction_completed'>): void {
  const d = e.data
  const kept = d.messages_after - 1
  const from = r.messages.length - kept
  const summary = summaryMessage(d.summary)
  r.messages = [summary, ...r.messages.slice(from)]
  r.message_seqs = [e.seq, ...r.message_seqs.slice(from)]
  r.message_turns = [e.turn, ...r.message_turns.slice(from)]
  r.history_chars = r.messages.reduce((n, m) => n + JSON.stringify(m).length, 0)
  r.compactions++
  r.history_generation++
  r.last_compaction_boundary_index = r.session_boundary_index
  r.last_input_tokens = 0
  if (d.usage) addUsage(r, e.turn, { input_tokens: 0, output_tokens: 0, compaction_tokens: d.usage.input_tokens + d.usage.output_tokens })
}

export { INPUT_REJECTED }

/**
 * Drops the messages a turn added (seq >= `fromSeq`). The turn's tool calls and results all lie
 * inside it, so the history stays valid. After a compaction, message 0 is the latest summary
 * (its seq is the compaction's, possibly inside this turn): it is kept.
 */
function rollBack(r: SessionRecord, fromSeq: number): void {
  const keep = (i: number) => r.message_seqs[i]! < fromSeq || (i === 0 && r.compactions > 0)
  const idx = r.messages.map((_, i) => i).filter(keep)
  if (idx.length === r.messages.length) return
  r.messages = idx.map((i) => r.messages[i]!)
  r.message_seqs = idx.map((i) => r.message_seqs[i]!)
  r.message_turns = idx.map((i) => r.message_turns[i]!)
  r.history_chars = r.messages.reduce((n, m) => n + JSON.stringify(m).length, 0)
  r.history_generation++
}

function addUsage(r: SessionRecord, turn: number, u: TokenTotals): void {
  r.usage.input_tokens += u.input_tokens
  r.usage.output_tokens += u.output_tokens
  r.usage.compaction_tokens += u.compaction_tokens
  const t = r.usage_by_turn.findLast((x) => x.turn === turn)
  if (t) {
    t.input_tokens += u.input_tokens
    t.output_tokens += u.output_tokens
    t.compaction_tokens += u.compaction_tokens
  }
}

export function zero(): TokenTotals {
  return { input_tokens: 0, output_tokens: 0, compaction_tokens: 0 }
}

export function totalTokens(u: TokenTotals): number {
  return u.input_tokens + u.output_tokens + u.compaction_tokens
}

/** Folds a whole log into a record (the rebuild path). */
export function rebuild(events: Iterable<EventEnvelope>): SessionRecord | undefined {
  let r: SessionRecord | undefined
  for (const e of events) r = applyEvent(r, e)
  return r
}
