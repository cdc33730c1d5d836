import type { EventEnvelope } from './events.js'
import type { SessionRecord } from './session-record.js'
import type { SessionQuery, SessionSummary, Page } from './wire.js'

/**
 * The per-session, append-only event log. Invariant: seqs are gapless from 1 per
 * session; an append is all-or-nothing together with the snapshot it produced.
 */
export interface EventStore {
  /** Stored events with `after < seq <= upTo`, ascending, at most `limit`. */
  readAfter(sessionId: string, after: number, upTo?: number, limit?: number): Promise<EventEnvelope[]>
  /** The last stored seq of a session (0 when it has none). */
  lastSeq(sessionId: string): Promise<number>
}

/**
 * A tenant's journal: the order in which the sessions' events were committed, one row per
 * commit of a session. It is what makes the tenant stream (`GET /v1/events`) resumable: each row
 * has a `base`, and its events' stream ids are `base + index` — ids grow in commit order, across
 * restarts too. A row holds at most {@link JOURNAL_ROW_SPAN} ids: events past the span share the
 * last one (see {@link streamPosition}). Old rows are pruned (a resume from before the oldest is
 * told `stream_truncated`); a deleted session's rows stay and read as nothing.
 *
 * LMDB numbers rows per tenant from 1 (base = position × span); PostgreSQL orders them by the
 * writing transaction's id and shows a row only once every older transaction has ended
 * (pg-tenant-journal.ts).
 */
export interface TenantJournal {
  /** Where a stream of the tenant starts: after stream id `after`, or from now (undefined). */
  start(tenant: string, after: number | undefined): Promise<JournalStart>
  /**
   * Rows with events whose stream ids are greater than `after`, in order, at most `limit`.
   * `waiting`: rows were committed that cannot be read yet (an older commit is still in
   * flight); ask again soon — no advance will be announced for them.
   */
  rowsAfter(tenant: string, after: number, limit: number): Promise<{ rows: JournalRow[]; waiting: boolean }>
  /** Calls `fn` with the tenants whose journal grew, after each commit that grew it. */
  onAdvance(fn: (tenants: readonly string[]) => void): () => void
}

export interface JournalStart {
  /** The stream id the stream stands after. */
  after: number
  /** The requested position could not be served: the first stream id that can be, and why. */
  truncated?: { first: number; reason: 'events_unavailable' | 'unknown_position' }
}

export interface JournalRow {
  /** The stream id of the row's first event. */
  base: number
  sessionId: string
  /** The row's events: seqs `first..last` of the session. */
  first: number
  last: number
  /**
   * The stream ids the row may use, from `base` on (default {@link JOURNAL_ROW_SPAN}): fewer when
   * it shares its span with other rows before it (PostgreSQL: one transaction's rows of a tenant).
   */
  span?: number
}

/** Stream ids per journal row, at most. */
export const JOURNAL_ROW_SPAN = 1024

/**
 * Where an event of a row stands on the tenant stream, and whether its frame carries that id.
 * Past the span a row's events share its last id and only the row's last event carries it: a
 * resume from inside that tail replays the tail (never a gap; the tail repeats).
 */
export function streamPosition(row: JournalRow, seq: number): { pos: number; shown: boolean } {
  const index = seq - row.first
  const span = row.span ?? JOURNAL_ROW_SPAN
  if (index < span - 1) return { pos: row.base + index, shown: true }
  return { pos: row.base + span - 1, shown: seq === row.last }
}

/** Session snapshots: derived from the log, a cache that can always be rebuilt from it. */
export interface SessionStore {
  get(sessionId: string): Promise<SessionRecord | undefined>
  /**
   * The tenant a session belongs to, without loading it (undefined when it does not exist): the
   * service checks it first, so another tenant's session answers as fast as an unknown id.
   */
  tenantOf(sessionId: string): Promise<string | undefined>
  /** Newest first; `cursor` is opaque (`next_cursor` of the previous page). */
  list(tenant: string, q: SessionQuery): Promise<Page<SessionSummary>>
  /**
   * Sessions whose last committed state has a turn running: what a crash left in flight. With
   * leases, only those whose lease has expired (or was never taken): another replica's live turn is never one.
   */
  runningTurns(): Promise<string[]>
  /** Every session id (for an explicit full rebuild, never on a hot path). */
  allIds(): AsyncIterable<string>
}

/** Where the projector keeps its progress: a checkpoint per session and the sessions it still owes. */
export interface ProjectionState {
  checkpoint(sessionId: string): Promise<number>
  /** Records that files reflect the log up to `seq`, and clears the session's pending mark if nothing newer was committed. */
  projected(sessionId: string, seq: number): Promise<void>
  /**
   * Sessions committed past their checkpoint (marked in the commit's own transaction). On a store
   * several processes share, also deleted sessions that had been projected: their files may be in
   * another process's directory, so the deletion leaves a mark there until `removed` clears it.
   */
  pending(): Promise<string[]>
  /** Forgets every checkpoint and marks every session pending (a rebuild from scratch). */
  reset(): Promise<void>
  /** A deleted session's files are gone: clears the mark its deletion left (stores that leave one). */
  removed?(sessionId: string): Promise<void>
}

/**
 * The right to write the projection files, held by one process at a time among those sharing a
 * store (PostgreSQL replicas), on the database's clock: renewed while held, anyone's once it expired.
 */
export interface ProjectionWriterLease {
  /** How long the lease lasts unless renewed. */
  readonly durationMs: number
  /** Takes the lease, or extends it when this process holds it; false while another holds one that has not expired. */
  hold(): Promise<boolean>
  /** Ends the lease now, if this process holds it (shutdown): another takes over at its next try. */
  release(): Promise<void>
}

/** A remembered outcome of an idempotent call. */
export interface IdempotencyRecord {
  fingerprint: string
  created_at: number
  outcome: { ok: true; value: unknown } | { ok: false; code: string; message: string; data?: Record<string, unknown> }
}

/**
 * An idempotency outcome written in the same transaction as the work it records (the session
 * commit that ends a turn, creates, forks or changes a session; a memory add): after any crash
 * a retry finds the work and its outcome, or neither.
 */
export interface IdempotencyWrite {
  /** The service's key: `tenant \0 session \0 key` (session `-` for calls outside a session). */
  key: string
  record: IdempotencyRecord
  /**
   * The claim of this process the outcome completes (`at` of the claim, with stores shared by
   * processes): work that no session lease covers (a create, a fork, a memory add) is then written
   * only while that claim still holds — never after another process took the key over.
   */
  claim?: number
}

/** What claiming an idempotency key found (stores shared by several processes). */
export type IdempotencyClaim =
  /**
   * The key is this process's now: it runs the call, then commits the outcome with the work (or
   * `put`s it, or `release`s the key). `at` names the claim (with this process's owner name).
   */
  | { kind: 'claimed'; at?: number }
  /** The call ran already: its outcome. */
  | { kind: 'done'; record: IdempotencyRecord }
  /** Another process runs the call with this key now (its claim is renewed while it runs). */
  | { kind: 'running'; fingerprint: string }

export interface IdempotencyStore {
  get(key: string): Promise<IdempotencyRecord | undefined>
  /**
   * Present when several processes share the store: takes the key for this process unless a
   * remembered outcome or a live claim of another process holds it (insert if absent, in one
   * step). A claim whose process died expires and can be taken again.
   */
  claim?(key: string, fingerprint: string): Promise<IdempotencyClaim>
  /** Gives a claimed key up without an outcome (the call was refused before doing any work). */
  release?(key: string): Promise<void>
  /** Remembers an outcome (completing this process's claim of the key, if it has one). */
  put(key: string, record: IdempotencyRecord): Promise<void>
  /** The key's outcome was committed with its work (an {@link IdempotencyWrite}): this process's claim of it is over. */
  completed?(key: string): void
  /** Drops records whose key starts with `prefix` (a deleted session's). */
  deletePrefix(prefix: string): Promise<void>
}

/**
 * A session's write lease, held by one process (a replica) while work that writes the session's
 * log runs there. Invariant: tokens of a session only grow, and the store refuses a commit whose
 * token is older than the newest lease taken on the session — a holder that lost its lease can
 * never write again.
 */
export interface SessionLease {
  /** The fencing token every commit made under this lease carries. */
  readonly token: number
  /** The session's last stored seq when the lease was taken: a cached record behind it is stale. */
  readonly lastSeq: number
  /** Who held the lease before (its owner), when someone did; this process's own id when it did. */
  readonly previousOwner: string | null
  /** Extends the lease by its duration; false when it was lost (it expired and another took it). */
  renew(): Promise<boolean>
  /** Ends the lease now (the session can be leased at once by anyone). */
  release(): Promise<void>
}

/** Leases on sessions, for stores that several processes share (PostgreSQL). */
export interface SessionLeases {
  /** The owner name of this process's leases. */
  readonly owner: string
  /** How long a lease lasts unless renewed. */
  readonly durationMs: number
  /** Takes the session's lease; {@link LeaseHeld} when another holds a lease that has not expired; undefined when there is no such session. */
  acquire(sessionId: string, tenant: string): Promise<SessionLease | LeaseHeld | undefined>
}

/** A lease another process holds; `running` when the store says a turn of the session runs (its holder works on it, or died in the middle of it). */
export interface LeaseHeld {
  readonly held: true
  readonly running: boolean
}

/**
 * Where a service keeps its sessions: the port every storage backend implements (LMDB, the
 * in-memory reference, PostgreSQL later) and the null repository of ephemeral mode, which keeps
 * nothing and refuses what needs stored sessions. Every operation may be asynchronous, so a
 * backend across the network fits behind it.
 */
export interface SessionRepository {
  readonly events: EventStore
  readonly sessions: SessionStore
  readonly idempotency: IdempotencyStore
  readonly projection: ProjectionState
  /**
   * Present when several processes may write the store (PostgreSQL): every write to an existing
   * session's log then happens under the session's lease and carries its token. Absent when one
   * process owns the store (LMDB's data-directory lock, the in-memory and null repositories):
   * the live session's `running` check is then the whole exclusion, and commits carry no token.
   */
  readonly leases?: SessionLeases
  /** Present when the store keeps a tenant journal (LMDB, PostgreSQL): the tenant stream can then resume. */
  readonly journal?: TenantJournal
  /**
   * Appends `events` (consecutive seqs following the stored or already queued last seq) and
   * writes the snapshot they produced, in one transaction. May group the commit with others
   * (of this and other sessions): `snapshot` can be a live record, read when the commit is
   * written, once every event applied to it has been committed too. Resolves once the events
   * are as durable as the store promises (with fsync durability: on disk); rejects, writing
   * nothing of them, on a seq gap or a failed write. Returns nothing when there is nothing to
   * wait for (the null repository): the events are then published at once. `fence` is the token
   * of the session's lease the commit is made under (0: none); with `leases`, a commit whose token
   * is older than the session's newest lease is refused, writing nothing. `outcomes` are written
   * in the same transaction as the events (into `idempotency`), or not at all.
   */
  commit(
    events: readonly EventEnvelope[],
    snapshot: SessionRecord,
    fence?: number,
    outcomes?: readonly IdempotencyWrite[],
  ): Promise<void> | void
  /**
   * Returns when sessions outlive the process here; the null repository throws
   * `SESSION_PERSISTENCE_DISABLED`. Operations that need stored sessions (read, list, archive,
   * delete, resume) ask first, so they refuse the same way on every surface.
   */
  requirePersistence(): void
  /**
   * False while the store cannot make writes durable (a write failed and nothing has succeeded
   * since); it turns true again by itself once writes work (LMDB probes while unhealthy).
   * Failed writes reject with `STORE_UNAVAILABLE`.
   */
  writable(): boolean
  /** Purges a session's events, snapshot, indexes, idempotency records and checkpoint. */
  deleteSession(sessionId: string, tenant: string): Promise<void>
  close(): Promise<void>
}
