import { asBinary, type Database, type Key } from 'lmdb'
import type { EventEnvelope } from '../core/events.js'
import type { Message } from '../core/messages.js'
import type { SessionRecord } from '../core/session-record.js'
import type { BurrowDbs } from './lmdb-dbs.js'
import {
  historyPartJson,
  resolveHistoryPart,
  scalarState,
  usageChunk,
  usageTailStart,
  type HistoryPart,
  type ScalarState,
  type TurnUsage,
} from './stored-history.js'

export { USAGE_CHUNK, usageChunk, type TurnUsage } from './stored-history.js'

// How a session is laid out in Burrow's LMDB environment (schema 4): the values each database
// holds, and the writes that store a session's events and the record they produce.

/** A turn's usage as stored: `[turn, input_tokens, output_tokens, compaction_tokens]` (a fifth of the object's JSON). */
export type UsageTuple = [number, number, number, number]

export function toTuple(u: TurnUsage): UsageTuple {
  return [u.turn, u.input_tokens, u.output_tokens, u.compaction_tokens]
}

export function fromTuple(t: UsageTuple): TurnUsage {
  return { turn: t[0], input_tokens: t[1], output_tokens: t[2], compaction_tokens: t[3] }
}

/** The snapshot as stored: the record without what lives in other keys (configuration, notes, long lists). */
export type Head = ScalarState & {
  /** The record's `history_generation` (schema-3 heads written before rollbacks existed hold `compactions`, the same number). */
  message_count: number
  message_generation: number
  /** The log row from which the current history's messages are read (the row of the last compaction, or the first). */
  messages_from: number
  /** Usage of the turns of the last usage chunk (the one still filling): it rides in the head, so a turn writes no row of its own. */
  usage_tail: UsageTuple[]
}

/**
 * A row of the log database (`[sid, first seq]`), as stored: the consecutive events one batch
 * appended to a session (without their session id: the key has it), and the history messages
 * they appended (`m.i` = index of the first; 0 after a compaction, whose row carries the whole
 * rebuilt history). A message that is an event's own content in the same row — the user input of
 * a `turn_started`, the message of an `assistant_message` — is stored as `{ r: index of that
 * event }`. Events and the snapshot's messages share one write.
 */
export interface LogRow {
  e: StoredEvent[]
  m?: HistoryPart
}

export type StoredEvent = Omit<EventEnvelope, 'session_id'>

/** The events of a stored row, with their session id. */
export function rowEvents(sid: string, row: LogRow): EventEnvelope[] {
  return row.e.map((e) => ({ seq: e.seq, session_id: sid, turn: e.turn, type: e.type, at: e.at, data: e.data }) as EventEnvelope)
}

/** The messages a stored row appended (references resolved), or undefined when it appended none. */
export function rowMessages(row: LogRow): { i: number; m: Message[]; s: number[]; t: number[] } | undefined {
  return row.m ? resolveHistoryPart(row.m, (k) => row.e[k]) : undefined
}

/**
 * A row's JSON, built by hand: the envelope's fields are known (a fixed event type, an ISO time,
 * numbers), only `data` and messages go through JSON.stringify — a third cheaper than stringifying
 * the row as objects, and no session id repeated per event.
 */
function rowJson(events: readonly EventEnvelope[], s: SessionRecord, from: number | null): string {
  let out = '{"e":['
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!
    out += `${i > 0 ? ',' : ''}{"seq":${e.seq},"turn":${e.turn},"type":"${e.type}","at":"${e.at}","data":${JSON.stringify(e.data)}}`
  }
  out += ']'
  if (from !== null) out += `,"m":${historyPartJson(events, s, from)}`
  return `${out}}`
}

/** What a write needs to know of a session's stored state (the writer keeps it per session: one writer per data dir). */
export interface Known {
  lastSeq: number
  messageCount: number
  generation: number
  messagesFrom: number
  status: string
  running: boolean
  marked: boolean
  usageChunk: number
}

/** One write of a batch: a serialized value, or a removal. */
export interface Op {
  db: Database<unknown, any>
  key: Key
  value?: Buffer
}

/**
 * Appends to `ops` what storing `events` (consecutive, following the stored state `k`) and the
 * record after them takes: one log row (the events and the messages they added, or the whole
 * history after a compaction), the head, usage rows the head has left, and the indexes that
 * changed. Returns the stored state they leave.
 */
export function sessionWrites(d: BurrowDbs, events: readonly EventEnvelope[], s: SessionRecord, k: Known | undefined, ops: Op[]): Known {
  const sid = s.session_id
  if (s.last_seq !== events[events.length - 1]!.seq)
    throw new Error(`snapshot of ${sid} is at seq ${s.last_seq}, log at ${events[events.length - 1]!.seq}`)
  const tenant = s.config.tenant
  if (!k) {
    ops.push({ db: d.configs, key: sid, value: json(s.config) })
    ops.push({ db: d.tenants, key: sid, value: json(tenant) })
    ops.push({ db: d.byTenant, key: [tenant, sid], value: ONE })
  }
  // The events, with the messages they appended; the whole history when a compaction or a rolled-back turn made a new generation.
  const first = events[0]!.seq
  let messagesFrom = k?.messagesFrom ?? first
  let from = k ? k.messageCount : 0
  if (k && (k.generation !== s.history_generation || k.messageCount > s.messages.length)) {
    from = 0
    messagesFrom = first
  }
  const withMessages = from < s.messages.length || messagesFrom === first
  ops.push({ db: d.events, key: [sid, first], value: Buffer.from(rowJson(events, s, withMessages ? from : null)) })
  // Usage by turn: the last chunk rides in the head; a row is written for each earlier chunk these events
  // touched (a turn's usage only changes through events of that turn) and for chunks the head has left.
  const usage = s.usage_by_turn
  const tail = usage.length > 0 ? usageChunk(usage[usage.length - 1]!.turn) : 0
  const firstChunk = Math.min(usageChunk(Math.max(1, events[0]!.turn)), k?.usageChunk ?? tail)
  if (firstChunk < tail) {
    let i = usage.length
    while (i > 0 && usageChunk(usage[i - 1]!.turn) >= firstChunk) i--
    for (let c = firstChunk; c < tail; c++) {
      const rows: UsageTuple[] = []
      while (i < usage.length && usageChunk(usage[i]!.turn) === c) rows.push(toTuple(usage[i++]!))
      if (rows.length > 0) ops.push({ db: d.turnUsage, key: [sid, c], value: json(rows) })
    }
  }
  if (events.some((e) => e.type === 'note_set' || e.type === 'note_deleted')) ops.push({ db: d.notes, key: sid, value: json(s.notes) })
  if (k && events.some((e) => e.type === 'session_updated')) ops.push({ db: d.configs, key: sid, value: json(s.config) })
  if (!k || k.status !== s.status) {
    if (k) ops.push({ db: d.byStatus, key: [tenant, k.status, sid] })
    ops.push({ db: d.byStatus, key: [tenant, s.status, sid], value: ONE })
  }
  const running = s.open_turn?.state === 'running'
  if (running && !k?.running) ops.push({ db: d.running, key: sid, value: json(s.open_turn!.turn) })
  else if (!running && k?.running !== false) ops.push({ db: d.running, key: sid })
  // The projector's mark, set once until it has caught up (it reads the target seq from the head).
  if (!k?.marked) ops.push({ db: d.pending, key: sid, value: ONE })
  ops.push({ db: d.heads, key: sid, value: json(headOf(s, messagesFrom)) })
  return {
    lastSeq: s.last_seq,
    messageCount: s.messages.length,
    generation: s.history_generation,
    messagesFrom,
    status: s.status,
    running,
    marked: true,
    usageChunk: tail,
  }
}

/** Appends to `ops` the removal of everything stored for a session. */
export function purgeWrites(d: BurrowDbs, sid: string, tenant: string, k: Known | undefined, ops: Op[]): void {
  for (const db of [d.events, d.turnUsage]) for (const key of db.getKeys({ start: [sid, 0], end: [sid, Infinity] })) ops.push({ db, key })
  for (const db of [d.heads, d.configs, d.tenants, d.notes, d.running, d.checkpoints, d.pending]) ops.push({ db, key: sid })
  ops.push({ db: d.byTenant, key: [tenant, sid] })
  if (k) ops.push({ db: d.byStatus, key: [tenant, k.status, sid] })
}

/** A session's stored state, read from its head (undefined when it has none). */
export function readKnown(d: BurrowDbs, sid: string): Known | undefined {
  const h = d.heads.get(sid) as Head | undefined
  if (!h) return undefined
  return {
    lastSeq: h.last_seq,
    messageCount: h.message_count,
    generation: h.message_generation,
    messagesFrom: h.messages_from,
    status: h.status,
    running: h.open_turn?.state === 'running',
    marked: d.pending.get(sid) !== undefined,
    usageChunk: h.usage_tail.length > 0 ? usageChunk(h.usage_tail[0]![0]) : 0,
  }
}

/** The head of a record: its scalar state and the LMDB layout's bookkeeping of its history and usage. */
export function headOf(r: SessionRecord, messagesFrom: number): Head {
  const usage = r.usage_by_turn
  return {
    ...scalarState(r),
    message_count: r.messages.length,
    message_generation: r.history_generation,
    messages_from: messagesFrom,
    usage_tail: usage.slice(usageTailStart(usage)).map(toTuple),
  }
}

/** Issues a batch's writes (inside a write transaction, or in one synchronous run). */
export function applyWrites(ops: readonly Op[]): void {
  for (const op of ops) {
    if (op.value === undefined) op.db.remove(op.key)
    else op.db.put(op.key, asBinary(op.value))
  }
}

/** Values are JSON (the environment's encoding); serialized here, before a batch's first put. */
export function json(v: unknown): Buffer {
  return Buffer.from(JSON.stringify(v))
}

export const ONE = json(1)
