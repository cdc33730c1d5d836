import type { Database } from 'lmdb'

/** The named databases of Burrow's LMDB environment (keys are ordered-binary, values JSON). */
export interface BurrowDbs {
  meta: Database<unknown, string>
  /** [session_id, first seq] → a LogRow: the consecutive events one batch appended to the session's log, and the messages they added */
  events: Database<unknown, [string, number]>
  /** session_id → snapshot head (the record without its configuration, notes and long lists) */
  heads: Database<unknown, string>
  /** session_id → configuration (written once, at creation) */
  configs: Database<unknown, string>
  /**
   * session_id → tenant (written with the session's first commit, since schema 4): the owner check
   * reads this small record, never the configuration, whose system prompt may be a megabyte
   */
  tenants: Database<unknown, string>
  /** session_id → session notes (written when they change) */
  notes: Database<unknown, string>
  /** [session_id, chunk] → [turn, input, output, compaction] tokens of turns chunk·16+1 … chunk·16+16 (the chunk still filling lives in the head) */
  turnUsage: Database<unknown, [string, number]>
  /** [tenant, session_id] → 1, and [tenant, status, session_id] → 1: list indexes */
  byTenant: Database<unknown, [string, string]>
  byStatus: Database<unknown, [string, string, string]>
  /** session_id → turn: sessions whose committed state has a turn running */
  running: Database<unknown, string>
  /** session_id → seq: projection checkpoints, and sessions committed past theirs */
  checkpoints: Database<unknown, string>
  pending: Database<unknown, string>
  /** [tenant, pos] → [session_id, first seq, last seq]: the tenant journal, in commit order (lmdb-tenant-journal.ts) */
  tenantLog: Database<unknown, [string, number]>
  /** tenant \0 session \0 key → idempotency record */
  idempotency: Database<unknown, string>
}
