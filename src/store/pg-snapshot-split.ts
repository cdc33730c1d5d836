import type pg from 'pg'
import type { SessionRecord } from '../core/session-record.js'
import { pgHeadOf, usageChunkRows } from './pg-session-layout.js'
import { historyPartJson, usageTailStart } from './stored-history.js'

const PAGE = 200

/**
 * Schema 4's data step: every session whose whole record is in `sessions.record` gets the split
 * layout (pg-session-layout.ts) — its history whole in its last event's row (which becomes
 * `messages_from`), its head, configuration and notes in their columns, the usage of all but the
 * last chunk of turns in `session_usage` — then the column goes. In JavaScript rather than SQL:
 * PostgreSQL's json functions refuse a document holding an escaped NUL, which user text may.
 */
export async function splitSnapshots(client: pg.ClientBase): Promise<void> {
  for (let after: [string, string] = ['', '']; ;) {
    const r = await client.query(
      `SELECT tenant, session_id, record::text AS record FROM sessions
       WHERE (tenant, session_id) > ($1, $2) ORDER BY tenant, session_id LIMIT ${PAGE}`,
      after,
    )
    for (const row of r.rows) {
      const s = JSON.parse(row.record as string) as SessionRecord
      s.notes ??= []
      s.history_generation ??= s.compactions
      const tailStart = usageTailStart(s.usage_by_turn)
      const { usageChunks, usageRows } = usageChunkRows(s.usage_by_turn, tailStart, 0)
      const key = [row.tenant, row.session_id]
      await client.query('UPDATE events SET m = $4::json WHERE tenant = $1 AND session_id = $2 AND seq = $3', [
        ...key,
        s.last_seq,
        historyPartJson([], s, 0),
      ])
      await client.query(
        `UPDATE sessions SET config = $3::json, notes = $4::json, head = $5::json, messages_from = last_seq, message_count = $6, generation = $7
         WHERE tenant = $1 AND session_id = $2`,
        [
          ...key,
          JSON.stringify(s.config),
          JSON.stringify(s.notes),
          JSON.stringify(pgHeadOf(s, tailStart)),
          s.messages.length,
          s.history_generation,
        ],
      )
      await client.query(
        `INSERT INTO session_usage (tenant, session_id, chunk, usage) SELECT $1, $2, c.chunk, c.usage
         FROM unnest($3::integer[], $4::json[]) AS c(chunk, usage)`,
        [...key, usageChunks, usageRows],
      )
      after = [row.tenant, row.session_id]
    }
    if (r.rows.length < PAGE) break
  }
  await client.query(`ALTER TABLE sessions DROP COLUMN record, ALTER COLUMN config SET NOT NULL, ALTER COLUMN notes SET NOT NULL,
    ALTER COLUMN head SET NOT NULL, ALTER COLUMN messages_from SET NOT NULL, ALTER COLUMN message_count SET NOT NULL,
    ALTER COLUMN generation SET NOT NULL`)
}
