import { BurrowError } from '../core/errors.js'
import type { SessionRecord } from '../core/session-record.js'
import { totalTokens } from './session-reducer.js'

/** Throws `BUDGET_EXCEEDED` once a session has used its `max_total_tokens` (compaction tokens count too). */
export function checkBudget(record: SessionRecord): void {
  const max = record.config.max_total_tokens
  if (max !== null && totalTokens(record.usage) >= max) {
    throw new BurrowError('BUDGET_EXCEEDED', `The session has used ${totalTokens(record.usage)} of its ${max} max_total_tokens.`)
  }
}
