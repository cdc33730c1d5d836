import { BurrowError, type ErrorCode } from '../core/errors.js'
import type { SessionRecord } from '../core/session-record.js'
import { idempotencyKey } from '../core/idempotency-keys.js'
import { failedOutcome, type Receipt } from './idempotency.js'
import type { LiveSession, PendingEvent } from './live-session.js'
import { INPUT_REJECTED } from './session-reducer.js'
import { turnUsage } from './turn-output.js'

/** What the run a close ends answers, when this process runs it (the turn loop's own failure). */
export interface RunEnd {
  /** The error's data (default: the close's reason). */
  data?: Record<string, unknown> | undefined
  /** The seq of the run's first event. */
  firstSeq?: number
  /** The run's request's receipt, when it came with an Idempotency-Key. */
  receipt?: Receipt | null
}

/**
 * Ends a session's open turn with `turn_failed`: every tool call still without a result gets a
 * synthetic error result first, so no tool call is left dangling. Returns what the run it ends
 * answers (null without an open turn) — and when that run's request came with an
 * Idempotency-Key (its receipt, or the turn's recorded request when the run was cut off by a
 * crash), that answer is the key's outcome, committed with the close.
 */
export async function closeOpenTurn(
  session: LiveSession,
  code: ErrorCode | string,
  message: string,
  reason?: string,
  run: RunEnd = {},
): Promise<BurrowError | null> {
  const open = session.record.open_turn
  if (!open) return null
  // A paused turn's request was answered by the pause; a running one's is answered by this close.
  const request = open.state === 'running' ? open.request : undefined
  const firstSeq = run.firstSeq ?? request?.first_seq ?? open.first_seq
  let answer!: BurrowError
  session.emit(open.turn, closingEvents(session.record, code, message, reason), (s) => {
    answer = new BurrowError(code as ErrorCode, message, {
      ...(run.data ?? (reason ? { reason } : {})),
      turn: open.turn,
      first_seq: firstSeq,
      last_seq: s.record.last_seq,
    })
    if (run.receipt) return run.receipt.seal(failedOutcome(answer))
    if (!request) return undefined
    return {
      key: idempotencyKey(s.tenant, s.id, request.key),
      record: { fingerprint: request.fingerprint, created_at: Date.now(), outcome: failedOutcome(answer) },
    }
  })
  return answer
}

/**
 * What ends a record's open turn with `turn_failed`: every tool call still without a result
 * gets a synthetic error result first, so no tool call is left dangling. None without an open turn.
 */
export function closingEvents(record: SessionRecord, code: ErrorCode | string, message: string, reason?: string): PendingEvent[] {
  const open = record.open_turn
  if (!open) return []
  const answered = new Set(open.results.map((r) => r.tool_use_id))
  const events: PendingEvent[] = []
  for (const c of open.pending_tool_calls) {
    if (answered.has(c.id)) continue
    events.push({
      type: 'tool_result',
      data: {
        tool_call_id: c.id,
        name: c.name,
        content: `Tool call not completed: the turn ended (${code}).`,
        is_error: true,
        synthetic: true,
      },
    })
  }
  const u = turnUsage(record, open.turn)
  // A rejected turn names the events it takes out of the history: they stay in the log, visible.
  const rejected =
    reason === INPUT_REJECTED ? { rejected_seq_range: [open.first_seq, record.last_seq + events.length] as [number, number] } : {}
  events.push({
    type: 'turn_failed',
    data: {
      code,
      message,
      ...(reason ? { reason } : {}),
      ...rejected,
      usage: { input_tokens: u.input_tokens, output_tokens: u.output_tokens },
    },
  })
  return events
}

/**
 * A turn the store says is running but nobody in this process runs: its events stopped reaching
 * the store (a failed write broke the session, which was then loaded back from the store). It is
 * closed as crash recovery closes one, so the session takes its next turn instead of answering
 * SESSION_BUSY for ever. Returns whether it closed one (the caller waits for it to be durable:
 * while the store still refuses writes that fails with STORE_UNAVAILABLE, and the next request tries again).
 */
export async function closeAbandonedTurn(session: LiveSession): Promise<boolean> {
  if (session.running || session.record.open_turn?.state !== 'running') return false
  await closeOpenTurn(session, 'STORE_UNAVAILABLE', 'The turn stopped when its events could not be stored.', 'store_unavailable')
  return true
}
