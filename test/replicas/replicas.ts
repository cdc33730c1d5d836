// Helpers of the multi-replica tests: the log as PostgreSQL holds it.
import type pg from 'pg'

export interface StoredEvent {
  seq: number
  turn: number
  type: string
  data: any
}

/** A session's events straight from the database, in order. */
export async function storedLog(db: pg.Client, id: string): Promise<StoredEvent[]> {
  const r = await db.query('SELECT seq, turn, type, data FROM events WHERE session_id = $1 ORDER BY seq', [id])
  return r.rows.map((row) => ({ seq: Number(row.seq), turn: row.turn, type: row.type, data: row.data }))
}
