// One adapter per surface, all with the same small interface, each speaking its surface's
// wire through a real client: REST (JSON and SSE turns), JSON-RPC over HTTP and stdio, MCP
// over streamable HTTP (the official SDK client). The CLI's adapter is in ./cli-surface.ts.
import { createInterface } from 'node:readline'
import { PassThrough } from 'node:stream'
import { request } from 'undici'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { Progress } from '@modelcontextprotocol/sdk/types.js'
import { TurnAssembler } from '../../src/client/turn-stream.js'
import type { EventEnvelope } from '../../src/core/events.js'
import { runRpcStdio } from '../../src/surfaces/rpc/rpc-stdio.js'
import type { ApiResponse, Harness } from '../helpers/harness.js'
import { compactionOf, failure, row, type Outcome, type TurnOutcome } from './outcome.js'

export type Params = Record<string, unknown>

export interface Opened {
  /** The create result; null where a surface cannot create without running a turn (the CLI's `run`). */
  created: Outcome | null
  /** The first turn; null when the create failed. */
  first: TurnOutcome | null
  id: string | undefined
}

/** The same scenario steps on every surface. Results are the surface's own, decoded but not normalised. */
export interface Surface {
  readonly name: string
  /** True when the surface streams a turn's events to its caller (and `TurnOutcome.streamed` is set). */
  readonly streaming: boolean
  capabilities(): Promise<Outcome>
  /** Creates a session with `req` and runs its first turn with `input`. */
  open(req: Params, input: string): Promise<Opened>
  /** A turn with `input`: started (`turn/start`) or, with `resume`, continuing a persisted session. */
  /** `extra`: more fields of the turn request (model settings, on_busy). */
  turn(id: string, input: string, how?: 'start' | 'resume', extra?: Record<string, unknown>): Promise<TurnOutcome>
  read(id: string): Promise<Outcome>
  list(q: { limit: number; metadata?: Record<string, string> }): Promise<Outcome>
  archive(id: string): Promise<Outcome>
  /** Forks a session (at `at_seq`, or now), returning the new session's view. */
  fork(id: string, req: Params): Promise<Outcome>
  /** Changes a session's settings (PATCH), returning its view. */
  update(id: string, changes: Params): Promise<Outcome>
  search(q: Params): Promise<Outcome>
  /** Memory management: `list` takes the list query, `get` and `delete` take `{ id }`. */
  memory(op: 'list' | 'get' | 'delete', q: Params): Promise<Outcome>
  /** Create and turn under an idempotency key, where the surface takes one (REST's header, JSON-RPC's param). */
  readonly keyed?: {
    create(req: Params, key: string): Promise<Outcome>
    turn(id: string, input: string, key: string): Promise<Outcome>
  }
  close(): Promise<void>
}

/** Opening is create-then-turn everywhere but the CLI. */
async function createThenTurn(s: Pick<Surface, 'turn'>, create: () => Promise<Outcome>, input: string): Promise<Opened> {
  const created = await create()
  if (!created.ok) return { created, first: null, id: undefined }
  const id = created.value.session_id as string
  return { created, first: await s.turn(id, input), id }
}

const query = (q: Params) =>
  new URLSearchParams(
    Object.entries(q).flatMap(([k, v]): Array<[string, string]> =>
      k === 'metadata' ? Object.entries(v as Record<string, string>).map(([mk, mv]) => [`metadata.${mk}`, mv]) : [[k, String(v)]],
    ),
  ).toString()

// ---- REST -----------------------------------------------------------------------------

/** A problem+json answer, checked against the table: status, media type, body. */
function problem(status: number, contentType: unknown, body: any): Outcome {
  const wire: string[] = []
  const code = body?.code
  if (!String(contentType ?? '').startsWith('application/problem+json')) wire.push(`content-type ${String(contentType)}`)
  if (row(String(code))?.http !== status) wire.push(`HTTP ${status} for ${String(code)} (table: ${row(String(code))?.http})`)
  if (body?.status !== status) wire.push(`problem.status ${body?.status} ≠ HTTP ${status}`)
  return failure(code, body?.detail, wire)
}

function rest(res: ApiResponse, okStatus = 200): Outcome {
  if (res.status === okStatus) return { ok: true, value: res.body }
  return problem(res.status, res.headers['content-type'], res.body)
}

/**
 * REST through the harness client (every response checked against openapi/openapi.json).
 * `sse`: turns are read as their SSE stream (`Accept: text/event-stream`) and the result is
 * rebuilt from the frames with the typed client's TurnAssembler; else they are JSON.
 */
export function restSurface(h: Harness, mode: 'json' | 'sse'): Surface {
  const { api } = h
  const s: Surface = {
    name: mode === 'json' ? 'rest' : 'rest-sse',
    streaming: mode === 'sse',
    capabilities: async () => rest(await api.get('/v1/capabilities')),
    open: (req, input) => createThenTurn(s, async () => rest(await api.post('/v1/sessions', req), 201), input),
    async turn(id, input, how = 'start', extra = {}) {
      const path = `/v1/sessions/${id}/${how === 'start' ? 'turns' : 'resume'}`
      if (mode === 'json') return { outcome: rest(await api.post(path, { input, ...extra })), streamed: null }
      const stream = await api.sse(path, { method: 'POST', body: { input, ...extra } })
      if (stream.status !== 200) return { outcome: problem(stream.status, stream.headers['content-type'], stream.problem), streamed: [] }
      try {
        const all = await stream.until((f) => ['turn_completed', 'turn_failed', 'turn_requires_action'].includes(f.event), 10_000)
        // turn_queued is a control frame (no seq), not an event of the session.
        const queued = all
          .filter((f) => f.event === 'turn_queued')
          .map((f) => (f.data as { data: { position: number | null } }).data.position)
        const frames = all.filter((f) => f.event !== 'turn_queued')
        const assembler = new TurnAssembler()
        let outcome: Outcome | undefined
        for (const f of frames) {
          const r = assembler.add(f.data as EventEnvelope)
          if (r?.kind === 'result') outcome = { ok: true, value: r.result }
          if (r?.kind === 'failed') outcome = failure(r.error.code, r.error.message, [])
        }
        const envelopes = frames.map((f) => f.data as EventEnvelope)
        return {
          outcome: outcome ?? failure('<no end>', 'the turn stream ended without an outcome', []),
          streamed: compactionOf(frames.map((f) => f.event)),
          envelopes,
          queued,
        }
      } finally {
        stream.close()
      }
    },
    read: async (id) => rest(await api.get(`/v1/sessions/${id}`)),
    list: async (q) => rest(await api.get(`/v1/sessions?${query(q)}`)),
    archive: async (id) => rest(await api.post(`/v1/sessions/${id}/archive`)),
    update: async (id, changes) => rest(await api.patch(`/v1/sessions/${id}`, changes)),
    fork: async (id, req) => rest(await api.post(`/v1/sessions/${id}/fork`, req), 201),
    search: async (q) => rest(await api.get(`/v1/memory/search?${query(q)}`)),
    async memory(op, q) {
      if (op === 'list') return rest(await api.get(`/v1/memory?${query(q)}`))
      if (op === 'get') return rest(await api.get(`/v1/memory/${q.id}`))
      const r = rest(await api.delete(`/v1/memory/${q.id}`), 204)
      return r.ok ? { ok: true, value: { id: q.id, deleted: true } } : r
    },
    ...(mode === 'json'
      ? {
          keyed: {
            create: async (req, key) => rest(await api.post('/v1/sessions', req, { headers: { 'idempotency-key': key } }), 201),
            turn: async (id, input, key) => rest(await api.turn(id, { input }, { headers: { 'idempotency-key': key } })),
          },
        }
      : {}),
    async close() {},
  }
  return s
}

// ---- JSON-RPC -------------------------------------------------------------------------

/** A JSON-RPC response, checked against the table: `error.code` is the row's number, `error.data.code` its name. */
function rpcOutcome(res: any): Outcome {
  if (res && 'result' in res) return { ok: true, value: res.result }
  const e = res?.error
  const wire: string[] = []
  const code = e?.data?.code
  if (row(String(code))?.rpc !== e?.code) wire.push(`error.code ${e?.code} for ${String(code)} (table: ${row(String(code))?.rpc})`)
  if (res?.jsonrpc !== '2.0') wire.push('jsonrpc is not "2.0"')
  return failure(code, e?.message, wire)
}

/** The scenario over any JSON-RPC call function (HTTP or a stdio line channel). */
function rpcSurface(
  name: string,
  call: (method: string, params: Params) => Promise<any>,
  streamed: { events(id: string): EventEnvelope[]; queued(id: string): Array<number | null> } | null,
  close: () => Promise<void>,
): Surface {
  const s: Surface = {
    name,
    streaming: streamed !== null,
    capabilities: async () => rpcOutcome(await call('capabilities/get', {})),
    open: (req, input) => createThenTurn(s, async () => rpcOutcome(await call('session/create', req)), input),
    async turn(id, input, how = 'start', extra = {}) {
      const before = streamed?.events(id).length ?? 0
      const queuedBefore = streamed?.queued(id).length ?? 0
      const outcome = rpcOutcome(await call(how === 'start' ? 'turn/start' : 'session/resume', { session_id: id, input, ...extra }))
      if (!streamed) return { outcome, streamed: null }
      const envelopes = streamed.events(id).slice(before)
      return { outcome, streamed: compactionOf(envelopes.map((e) => e.type)), envelopes, queued: streamed.queued(id).slice(queuedBefore) }
    },
    read: async (id) => rpcOutcome(await call('session/read', { session_id: id })),
    list: async (q) => rpcOutcome(await call('session/list', q)),
    archive: async (id) => rpcOutcome(await call('session/archive', { session_id: id })),
    update: async (id, changes) => rpcOutcome(await call('session/update', { session_id: id, ...changes })),
    fork: async (id, req) => rpcOutcome(await call('session/fork', { session_id: id, ...req })),
    search: async (q) => rpcOutcome(await call('memory/search', q)),
    memory: async (op, q) => rpcOutcome(await call(`memory/${op}`, q)),
    keyed: {
      create: async (req, key) => rpcOutcome(await call('session/create', { ...req, idempotency_key: key })),
      turn: async (id, input, key) => rpcOutcome(await call('turn/start', { session_id: id, input, idempotency_key: key })),
    },
    close,
  }
  return s
}

export function rpcHttpSurface(h: Harness): Surface {
  let n = 0
  const call = async (method: string, params: Params) => {
    const res = await request(`${h.url}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: ++n, method, params }),
    })
    const body: any = await res.body.json()
    if (res.statusCode !== 200) throw new Error(`POST /rpc answered HTTP ${res.statusCode}`)
    if (body.id !== n) throw new Error(`POST /rpc answered id ${body.id} to request ${n}`)
    return body
  }
  return rpcSurface('rpc-http', call, null, async () => {})
}

/**
 * JSON-RPC over a stdio line channel: `serve` runs the server end on the two streams (the
 * transport in-process, or `burrow rpc`); `event` notifications are collected per session.
 */
export function rpcStdioSurface(name: string, serve: (input: PassThrough, output: PassThrough) => Promise<unknown>): Surface {
  const input = new PassThrough()
  const output = new PassThrough()
  const served = serve(input, output)
  const pending = new Map<number, (msg: any) => void>()
  const events = new Map<string, EventEnvelope[]>()
  const queued = new Map<string, Array<number | null>>()
  const problems: string[] = []
  let n = 0
  const lines = createInterface({ input: output, crlfDelay: Infinity })
  lines.on('line', (line) => {
    const msg = JSON.parse(line)
    if (msg.method === 'event') {
      const e = msg.params as EventEnvelope
      if (!events.has(e.session_id)) events.set(e.session_id, [])
      events.get(e.session_id)!.push(e)
    } else if (msg.method === 'queued') {
      const { session_id: sid, position } = msg.params as { session_id: string; position: number | null }
      if (!queued.has(sid)) queued.set(sid, [])
      queued.get(sid)!.push(position)
    } else if (pending.has(msg.id)) {
      pending.get(msg.id)!(msg)
      pending.delete(msg.id)
    } else {
      problems.push(`unexpected line: ${line.slice(0, 200)}`)
    }
  })
  const call = (method: string, params: Params) =>
    new Promise<any>((resolve) => {
      const id = ++n
      pending.set(id, resolve)
      input.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`)
    })
  return rpcSurface(name, call, { events: (id) => events.get(id) ?? [], queued: (id) => queued.get(id) ?? [] }, async () => {
    input.end()
    await served
    lines.close()
    if (problems.length > 0) throw new Error(`${name}: ${problems.join('; ')}`)
  })
}

export function rpcStdioInProcess(h: Harness): Surface {
  return rpcStdioSurface('rpc-stdio', (input, output) => runRpcStdio(h.burrow.service, {}, { input, output }))
}

// ---- MCP ------------------------------------------------------------------------------

/** What mcp-server.ts says in a progress notification for each compaction event. */
const MCP_PROGRESS: Record<string, string> = { 'compacting history': 'compaction_started', 'history compacted': 'compaction_completed' }

type ToolResult = { isError?: boolean; content: Array<{ type: string; text?: string }>; structuredContent?: any }

/** An MCP tool result: an error is `isError` with `structuredContent.code` and text `error[CODE]: message`. */
function mcpOutcome(r: ToolResult): Outcome {
  if (!r.isError) return { ok: true, value: r.structuredContent }
  const sc = r.structuredContent ?? {}
  const wire: string[] = []
  const text = r.content[0]?.text
  if (text !== `error[${sc.code}]: ${sc.message}`) wire.push(`text ${JSON.stringify(text)}`)
  return failure(sc.code, sc.message, wire)
}

export async function mcpSurface(h: Harness): Promise<Surface> {
  const client = new Client({ name: 'burrow-parity', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${h.url}/mcp`)))
  const tool = async (name: string, args: Params, onprogress?: (p: Progress) => void) =>
    (await client.callTool({ name, arguments: args }, undefined, onprogress ? { onprogress } : {})) as unknown as ToolResult
  const s: Surface = {
    name: 'mcp',
    streaming: true,
    capabilities: async () => mcpOutcome(await tool('capabilities_get', {})),
    open: (req, input) => createThenTurn(s, async () => mcpOutcome(await tool('session_create', req)), input),
    async turn(id, input, how = 'start', extra = {}) {
      const progress: string[] = []
      const r = await tool(how === 'start' ? 'turn_run' : 'session_resume', { session_id: id, input, ...extra }, (p) => {
        if (p.message) progress.push(p.message)
      })
      const queued = progress.flatMap((m) => {
        const q = /^queued(?: \(position (\d+)\)| behind a turn on another replica)$/.exec(m)
        return q ? [q[1] === undefined ? null : Number(q[1])] : []
      })
      return { outcome: mcpOutcome(r), streamed: progress.flatMap((m) => (MCP_PROGRESS[m] ? [MCP_PROGRESS[m]!] : [])), queued }
    },
    read: async (id) => mcpOutcome(await tool('session_read', { session_id: id })),
    list: async (q) => mcpOutcome(await tool('session_list', q)),
    archive: async (id) => mcpOutcome(await tool('session_archive', { session_id: id })),
    update: async (id, changes) => mcpOutcome(await tool('session_update', { session_id: id, ...changes })),
    fork: async (id, req) => mcpOutcome(await tool('session_fork', { session_id: id, ...req })),
    search: async (q) => mcpOutcome(await tool('memory_search', q)),
    memory: async (op, q) => mcpOutcome(await tool(`memory_${op}`, q)),
    close: () => client.close(),
  }
  return s
}
