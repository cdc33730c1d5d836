import { invalidRequest } from '../core/errors.js'
import { NOTE_VALUE_MAX } from '../core/session-record.js'
import type { ToolSession } from '../core/tools.js'
import type { LiveSession } from './live-session.js'

const NOTE_KEY = /^[A-Za-z0-9_.:-]{1,128}$/

/**
 * The notes of a live session, read from its record and changed through events (so the log
 * records them), as a client (`PUT …/notes/{key}`) or the agent (`note_set`) changes them.
 * `fields` names the request fields a validation error points at.
 */
export function notesAccess(
  session: LiveSession,
  turn: number,
  by: 'client' | 'agent',
  fields = { key: 'key', value: 'value' },
): ToolSession {
  return {
    notes: () => session.record.notes.map((n) => ({ key: n.key, value: n.value })),
    async setNote(key, value) {
      if (!NOTE_KEY.test(key)) throw invalidRequest(fields.key, 'must be 1–128 letters, digits, _ . : -')
      if (value.length > NOTE_VALUE_MAX) throw invalidRequest(fields.value, `must be at most ${NOTE_VALUE_MAX} characters`)
      session.emit(turn, [{ type: 'note_set', data: { key, value, by } }])
    },
    async deleteNote(key) {
      if (!session.record.notes.some((n) => n.key === key)) return false
      session.emit(turn, [{ type: 'note_deleted', data: { key, by } }])
      return true
    },
  }
}
