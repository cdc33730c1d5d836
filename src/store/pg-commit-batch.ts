import type { EventEnvelope } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { IdempotencyWrite } from '../core/stores.js'
import { splitIdempotencyKey } from './idempotency-key.js'
import { commitParts } from './pg-session-layout.js'

/** One session's part of a batch: its events (consecutive, following its stored log) and its record after them (at their last seq: the writer checks). */
export interface BatchEntry {
  events: readonly EventEnvelope[]
  snapshot: SessionRecord
  /** The fencing token of the lease the events were made under (0: none). */
  fence: number
  /** Where the entry's tenant-journal row starts inside the transaction's span (pg-tenant-journal.ts). */
  journalStart: number
  /** Idempotency outcomes written with the events, only if they are. */
  outcomes: readonly IdempotencyWrite[]
}

// One statement writes every session of a batch, so a batch costs one round trip and one
// transaction, and is atomic without BEGIN/COMMIT (bench/pg-driver.bench.ts: a statement makes
// 1.5–1.8× the commits/s of the same writes as a transaction). Per session (`i`, one row each): a
// first commit inserts the session's row (none may exist); a later one updates it only where the
// stored log ends right before the entry's events, no commit with a newer fencing token has
// written, and — unless the entry stores the history whole — the stored history is the one it
// extends. Only the sessions whose row was written (`w`) get their events (the first row with the
// history messages they appended, pg-session-layout.ts), usage chunks and tenant-journal row
// (keyed by the statement's own transaction id and the entry's start in its span); the statement
// returns them. A session whose row did not match stores nothing; the others are written all the same.
//
// A commit made under a lease (a token above 0) also needs the session's lease row to hold that
// token for this replica ($34): leases are taken and released without waiting for their WAL flush
// (pg-leases.ts), and a database that crashed before flushing one has forgotten it — commits under
// its token must then be refused. Once a commit is durable, so is every lease taken before it (the
// WAL is flushed in order).
//
// The idempotency outcomes an entry carries ($35–$40: the key's tenant, scope and caller part, the
// record, and the entry's session that gates it) are written only where that session's row was:
// a request's outcome and its work commit together (idempotency.ts, Receipt). A row claimed by a
// replica (pg-idempotency-store.ts) becomes the outcome.
const LEASED = `(i.fence = 0 OR EXISTS (SELECT 1 FROM leases l
  WHERE l.tenant = i.tenant AND l.session_id = i.session_id AND l.token = i.fence AND l.owner = $34))`

// A new session made by a call holding an idempotency claim (a create, a fork: no session lease
// covers them) is inserted only while this replica's claim still holds ($41–$43: the key's scope,
// caller part and the claim's time): a replica that stalled past its claim and commits after
// another took the key over stores nothing (the other's run is the key's). The claim's row is
// locked until the commit, so a takeover waits for it and then finds the key done.
const CLAIMED = `(i.claim_at IS NULL OR EXISTS (SELECT 1 FROM idempotency d WHERE d.tenant = i.tenant
  AND d.session_id = i.claim_scope AND d.key = i.claim_key AND d.owner = $34 AND d.created_at = i.claim_at
  AND d.pending_until IS NOT NULL FOR SHARE OF d))`

export const COMMIT_BATCH = `WITH i AS (
  SELECT tenant, session_id, status, created_at, updated_at, model, metadata, turn_count, last_seq, running, fence, head, prev,
    ${orNull('config')} AS config, ${orNull('notes')} AS notes, message_count, generation, forked_from, whole, extends, jstart,
    claim_scope, claim_key, claim_at
  FROM ROWS FROM (unnest($1::text[]), unnest($2::text[]), unnest($3::text[]), unnest($4::text[]), unnest($5::text[]),
    unnest($6::text[]), json_array_elements($7::json), unnest($8::integer[]), unnest($9::bigint[]), unnest($10::boolean[]),
    unnest($11::bigint[]), json_array_elements($12::json), unnest($13::bigint[]), json_array_elements($14::json),
    json_array_elements($15::json), unnest($16::integer[]), unnest($17::integer[]), json_array_elements($18::json),
    unnest($19::boolean[]), unnest($20::integer[]), unnest($21::integer[]), unnest($41::text[]), unnest($42::text[]),
    unnest($43::bigint[]))
  AS r(tenant, session_id, status, created_at, updated_at, model, metadata, turn_count, last_seq, running, fence, head, prev,
    config, notes, message_count, generation, forked_from, whole, extends, jstart, claim_scope, claim_key, claim_at)),
ins AS (
  INSERT INTO sessions (tenant, session_id, status, created_at, updated_at, model, metadata, turn_count, last_seq, running, fence,
    head, config, notes, messages_from, message_count, generation, forked_from)
  SELECT tenant, session_id, status, created_at, updated_at, model, metadata, turn_count, last_seq, running, fence,
    head, config, notes, 1, message_count, generation, forked_from FROM i WHERE prev = 0 AND ${LEASED} AND ${CLAIMED}
  ON CONFLICT DO NOTHING RETURNING tenant, session_id),
upd AS (
  UPDATE sessions AS s SET status = i.status, created_at = i.created_at, updated_at = i.updated_at, model = i.model,
    metadata = i.metadata, turn_count = i.turn_count, last_seq = i.last_seq, running = i.running, fence = i.fence, head = i.head,
    notes = coalesce(i.notes, s.notes), config = coalesce(i.config, s.config),
    messages_from = CASE WHEN i.whole THEN i.prev + 1 ELSE s.messages_from END, message_count = i.message_count,
    generation = i.generation
  FROM i WHERE i.prev > 0 AND s.tenant = i.tenant AND s.session_id = i.session_id AND s.last_seq = i.prev AND s.fence <= i.fence
    AND (i.whole OR (s.message_count = i.extends AND s.generation = i.generation)) AND ${LEASED}
  RETURNING s.tenant, s.session_id),
w AS (SELECT tenant, session_id FROM ins UNION ALL SELECT tenant, session_id FROM upd),
usage_rows AS (
  INSERT INTO session_usage (tenant, session_id, chunk, usage)
  SELECT c.tenant, c.session_id, c.chunk, c.usage
  FROM ROWS FROM (unnest($22::text[]), unnest($23::text[]), unnest($24::integer[]), json_array_elements($25::json))
    AS c(tenant, session_id, chunk, usage)
  WHERE EXISTS (SELECT 1 FROM w WHERE w.tenant = c.tenant AND w.session_id = c.session_id)
  ON CONFLICT (tenant, session_id, chunk) DO UPDATE SET usage = excluded.usage),
journal_rows AS (
  INSERT INTO tenant_log (tenant, xid, start, session_id, first, last)
  SELECT i.tenant, pg_current_xact_id(), i.jstart, i.session_id, i.prev + 1, i.last_seq FROM i
  WHERE EXISTS (SELECT 1 FROM w WHERE w.tenant = i.tenant AND w.session_id = i.session_id)),
ev AS (
  INSERT INTO events (tenant, session_id, seq, turn, type, at, data, m)
  SELECT u.tenant, u.session_id, u.seq, u.turn, u.type, u.at, u.data, ${orNull('u.m')}
  FROM ROWS FROM (unnest($26::text[]), unnest($27::text[]), unnest($28::bigint[]), unnest($29::integer[]), unnest($30::text[]),
    unnest($31::text[]), json_array_elements($32::json), json_array_elements($33::json))
    AS u(tenant, session_id, seq, turn, type, at, data, m)
  WHERE EXISTS (SELECT 1 FROM w WHERE w.tenant = u.tenant AND w.session_id = u.session_id)),
outcomes AS (
  INSERT INTO idempotency (tenant, session_id, key, created_at, record)
  SELECT o.tenant, o.scope, o.key, o.created_at, o.record
  FROM ROWS FROM (unnest($35::text[]), unnest($36::text[]), unnest($37::text[]), unnest($38::bigint[]), json_array_elements($39::json),
    unnest($40::text[])) AS o(tenant, scope, key, created_at, record, gate)
  WHERE EXISTS (SELECT 1 FROM w WHERE w.tenant = o.tenant AND w.session_id = o.gate)
  ON CONFLICT (tenant, session_id, key) DO UPDATE SET created_at = excluded.created_at, record = excluded.record, pending_until = NULL)
SELECT session_id FROM w`

/** A json column's SQL NULL, sent as the JSON null of its array (a JSON array's elements cannot be SQL NULL). */
function orNull(col: string): string {
  return `CASE WHEN json_typeof(${col}) = 'null' THEN NULL ELSE ${col} END`
}

/** The parameters (1-based) sent as one JSON array of already serialized documents rather than as a PostgreSQL array. */
const JSON_COLUMNS = [7, 12, 14, 15, 18, 25, 32, 33]
/** The outcomes' parameters after the owner ($34): $35–$40, the record ($39) a JSON array. */
const OUTCOME_COLUMNS = 6

/**
 * The statement's parameters: one array element per session (and per usage chunk, per event).
 * Each record is serialized here, synchronously — the live record, as it is when the batch starts.
 */
export function commitBatchValues(entries: readonly BatchEntry[], owner: string): unknown[] {
  const cols: unknown[][] = Array.from({ length: 33 }, () => [])
  const col = (k: number) => cols[k - 1]!
  const out: Array<Array<string | number>> = Array.from({ length: OUTCOME_COLUMNS }, () => [])
  const claims: Array<Array<string | number | null>> = [[], [], []]
  for (const { events, snapshot: s, fence, journalStart, outcomes } of entries) {
    const tenant = s.config.tenant
    const sid = s.session_id
    const first = events[0]!.seq
    const parts = commitParts(events, s)
    const firstCommit = first === 1
    const row = [
      tenant,
      sid,
      s.status,
      s.created_at,
      s.updated_at,
      s.config.model,
      JSON.stringify(s.config.metadata ?? {}),
      s.turn_count,
      s.last_seq,
      s.open_turn?.state === 'running',
      fence,
      parts.head,
      first - 1,
      // The first commit stores the configuration; a later one only when its events changed it.
      firstCommit ? JSON.stringify(s.config) : parts.config,
      parts.notes,
      s.messages.length,
      s.history_generation,
      firstCommit ? JSON.stringify(s.config.forked_from ?? null) : null,
      parts.whole,
      parts.from,
      journalStart,
    ]
    for (let k = 0; k < row.length; k++) cols[k]!.push(row[k])
    for (let c = 0; c < parts.usageChunks.length; c++) {
      col(22).push(tenant)
      col(23).push(sid)
      col(24).push(parts.usageChunks[c])
      col(25).push(parts.usageRows[c])
    }
    for (let e = 0; e < events.length; e++) {
      const ev = events[e]!
      col(26).push(tenant)
      col(27).push(sid)
      col(28).push(ev.seq)
      col(29).push(ev.turn)
      col(30).push(ev.type)
      col(31).push(ev.at)
      col(32).push(JSON.stringify(ev.data))
      col(33).push(e === 0 ? parts.part : null)
    }
    for (const o of outcomes) {
      const [tenant, scope, key] = splitIdempotencyKey(o.key)
      for (const [k, v] of [tenant, scope, key, o.record.created_at, JSON.stringify(o.record), sid].entries()) out[k]!.push(v)
    }
    const claimed = firstCommit ? outcomes.find((o) => o.claim !== undefined) : undefined
    const [, scope, key] = claimed ? splitIdempotencyKey(claimed.key) : [null, null, null]
    for (const [k, v] of [scope, key, claimed?.claim ?? null].entries()) claims[k]!.push(v)
  }
  return [
    ...cols.map((c, k) => (JSON_COLUMNS.includes(k + 1) ? jsonArray(c as Array<string | null>) : c)),
    owner,
    ...out.map((c, k) => (k === 4 ? jsonArray(c as string[]) : c)),
    ...claims,
  ]
}

/**
 * Documents already serialized, as one JSON array: what `json_array_elements` splits again, each
 * element's text as it was. A PostgreSQL array of json would have every quote and backslash of
 * every document escaped once more on the way (node-postgres' array literals: its `escapeElement`
 * was 8 % of the service's CPU under the turns-durable load).
 */
function jsonArray(docs: ReadonlyArray<string | null>): string {
  return `[${docs.map((d) => d ?? 'null').join(',')}]`
}
