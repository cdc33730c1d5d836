// What one surface answered, in a form every surface can be compared in: a value or a
// code-table failure, plus the compaction events the surface streamed during a turn.
import type { Test } from 'tap'
import { ERROR_TABLE, isErrorCode } from '../../src/core/errors.js'
import type { EventEnvelope } from '../../src/core/events.js'

export type Failure = {
  ok: false
  code: string
  message: string
  /** Where this surface's own error shape disagrees with the code table (empty when it agrees). */
  wire: string[]
}
export type Outcome =
  { ok: true; value: any; /** Only some fields are known (the CLI's text mode): compare those. */ partial?: boolean } | Failure

export interface TurnOutcome {
  outcome: Outcome
  /** compaction_started / compaction_completed, in order, as this surface streamed them during the turn; null when it streams nothing. */
  streamed: string[] | null
  /** The event envelopes the surface delivered during the turn, where it delivers envelopes (SSE, JSON-RPC notifications). */
  envelopes?: EventEnvelope[]
  /** What the surface said while the request waited for the session (`on_busy: queue`): each place in line told; absent where it cannot say. */
  queued?: Array<number | null>
}

/** The compaction events every streaming surface must show (MCP progress reports only these two). */
export const COMPACTION_TYPES = ['compaction_started', 'compaction_completed'] as const

export const compactionOf = (types: string[]) => types.filter((x) => (COMPACTION_TYPES as readonly string[]).includes(x))

export function failure(code: unknown, message: unknown, wire: string[]): Failure {
  const c = typeof code === 'string' ? code : `<${String(code)}>`
  if (!isErrorCode(c)) wire.push(`unknown code ${c}`)
  return { ok: false, code: c, message: typeof message === 'string' ? message : `<${String(message)}>`, wire }
}

/** The table row's value for `code`, or undefined for an unknown code. */
export function row(code: string) {
  return isErrorCode(code) ? ERROR_TABLE[code] : undefined
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi

/** Session ids differ between surfaces (each runs its own session); messages are compared without them. */
export const scrubIds = (s: string) => s.replace(UUID, '<id>')

function omit(v: any, keys: string[]): any {
  if (v === null || typeof v !== 'object') return v
  const out = { ...v }
  for (const k of keys) delete out[k]
  return out
}

/**
 * Normalisers per result kind: ids and timestamps go; with semantic memory on, seq numbers
 * go too, because `memory_indexed` is recorded asynchronously and may take a seq in the
 * middle of a later turn, differently for each session.
 */
export const norm = {
  created: (v: any) => omit(v, ['session_id', 'created_at']),
  turn: (seqs: boolean) => (v: any) => omit(v, seqs ? ['session_id'] : ['session_id', 'first_seq', 'last_seq']),
  view: (seqs: boolean) => (v: any) =>
    omit(v, seqs ? ['session_id', 'created_at', 'updated_at'] : ['session_id', 'created_at', 'updated_at', 'last_seq']),
  archived: (v: any) => omit(v, ['session_id']),
  /** A turn paused on client tools: each session's tool call ids are its own. */
  paused: (v: any) => ({ ...omit(v, ['session_id']), tool_calls: (v?.tool_calls ?? []).map((c: any) => omit(c, ['id'])) }),
  hits: (v: any) => ({ results: (v?.results ?? []).map((h: any) => omit(h, ['id', 'session_id', 'seq'])) }),
  same: (v: any) => v,
}

/** A partial value is compared with the reference's fields of the same names only. */
function project(reference: any, partial: any): any {
  if (reference === null || typeof reference !== 'object') return reference
  return Object.fromEntries(Object.keys(partial).map((k) => [k, reference[k]]))
}

function shape(o: Outcome, normalise: (v: any) => any, compareMessages: boolean): any {
  if (o.ok) return { ok: true, value: normalise(o.value) }
  return { ok: false, code: o.code, ...(compareMessages ? { message: scrubIds(o.message) } : {}) }
}

export interface AgreeOptions {
  /** The code every surface must fail with; undefined: every surface must succeed. */
  code?: string | undefined
  normalise?: (v: any) => any
}

/**
 * Asserts that every surface answered alike: the same code (and, except for
 * INVALID_REQUEST, whose field names are the surface's own, the same message), or the same
 * normalised value; and that each surface's own error shape agrees with the code table.
 * Returns the reference (first) outcome's normalised value, when it succeeded.
 */
export function agree(t: Test, label: string, results: Array<[string, Outcome]>, opts: AgreeOptions = {}): any {
  const normalise = opts.normalise ?? norm.same
  const first = results[0]
  if (!first) return undefined
  for (const [name, o] of results) {
    if (opts.code === undefined) {
      t.ok(o.ok, `${label}: ${name} succeeds${o.ok ? '' : ` (got ${o.code}: ${o.message})`}`)
    } else {
      t.equal(o.ok ? 'ok' : o.code, opts.code, `${label}: ${name} fails with ${opts.code}${o.ok ? '' : ` (${o.message})`}`)
    }
    if (!o.ok) t.same(o.wire, [], `${label}: ${name}'s error shape agrees with the code table`)
  }
  const [refName, ref] = first
  const compareMessages = opts.code !== 'INVALID_REQUEST'
  const refShape = shape(ref, normalise, compareMessages)
  for (const [name, o] of results.slice(1)) {
    const mine = shape(o, normalise, compareMessages)
    const expected = o.ok && o.partial && refShape.ok ? { ok: true, value: project(refShape.value, mine.value) } : refShape
    t.same(mine, expected, `${label}: ${name} answers as ${refName}`)
  }
  return refShape.ok ? refShape.value : undefined
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/

/**
 * Between two builds every id differs (sessions and memory entries are each build's own), and so
 * do timestamps and the opaque list cursors built from them: those become placeholders. Nothing
 * else is dropped, so what a store decides — codes, messages, counts, order, text, scores — stays.
 */
export function acrossBuilds(v: any): any {
  if (typeof v === 'string') return ISO_TIME.test(v) ? '<time>' : scrubIds(v)
  if (Array.isArray(v)) return v.map(acrossBuilds)
  if (v === null || typeof v !== 'object') return v
  return Object.fromEntries(
    Object.entries(v).map(([k, x]) => [k, k.endsWith('cursor') && typeof x === 'string' ? '<cursor>' : acrossBuilds(x)]),
  )
}

/**
 * What one build answered, step by step: the reference surface's outcome of every `agree`, in
 * the shape `agree` compares surfaces in. Two builds that must answer alike (the same
 * capabilities on another store) compare their transcripts through `acrossBuilds`.
 */
export class Transcript {
  readonly steps: Array<[string, unknown]> = []

  agree = (t: Test, label: string, results: Array<[string, Outcome]>, opts: AgreeOptions = {}): any => {
    const first = results[0]
    if (first) {
      const compareMessages = opts.code !== 'INVALID_REQUEST'
      this.steps.push([`${t.name}: ${label}`, acrossBuilds(shape(first[1], opts.normalise ?? norm.same, compareMessages))])
    }
    return agree(t, label, results, opts)
  }

  /** Records a value a step observed outside `agree` (one for the build as a whole). */
  note(t: Test, label: string, value: unknown): void {
    this.steps.push([`${t.name}: ${label}`, acrossBuilds(value)])
  }
}
