/**
 * The MCP surface (docs/surfaces.md, MCP): Burrow's operations as MCP tools, a thin adapter
 * over the one SessionService. Each tool returns the service's result as
 * `structuredContent` plus a short text; a failure is a tool error (`isError: true`)
 * with text `error[CODE]: message` and `structuredContent: { code, message, ...data }`.
 *
 * Tool input schemas are the wire request schemas of core/wire.ts — the ones the REST routes
 * and the JSON-RPC methods validate against. `tools/list` serves them as JSON Schema, and
 * arguments are checked with the same validator (request-validation.ts), so a bad argument
 * gets the code and field (`arguments/<path>`) the other surfaces give. The SDK's low-level
 * Server takes JSON Schema as it is; its McpServer wants zod schemas, which would be a second
 * copy of every request.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv'
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type Tool as ListedTool,
  type ToolAnnotations,
} from '@modelcontextprotocol/sdk/types.js'
import type { Static, TSchema } from 'typebox'
import { ERROR_TABLE, toBurrowError } from '../../core/errors.js'
import type { TraceContext } from '../../core/tracing.js'
import { progressReporter, type Extra } from './mcp-progress.js'
import { JSON_RPC } from '../../core/protocol-numbers.js'
import type { CallContext, SessionOperations } from '../../core/session-service.js'
import {
  CreateSessionSchema,
  MemoryPageQuerySchema,
  MemoryRefSchema,
  MemorySearchQuerySchema,
  NoParamsSchema,
  SessionQuerySchema,
  SessionRefSchema,
  SessionUpdateSchema,
  SessionForkSchema,
  SessionTurnSchema,
  type StartTurn,
  type TurnResult,
} from '../../core/wire.js'
import { argumentsCheck } from '../request-validation.js'

export type { Extra }
/** What each tool call gets from its transport (the service authenticates `apiKey`); `extra` is the call's. */
export type McpCallContext = (extra: Extra) => { apiKey?: string | undefined; requestId: string; trace?: TraceContext | undefined }
export interface McpServerOptions {
  /** Called with unexpected (`INTERNAL`) errors, which clients see without detail. */
  logError?: (err: unknown, requestId: string) => void
  /** The version the server reports to clients (the service's, from its capabilities). */
  version?: string
  /**
   * Whether the transport delivers a client's cancellations (default true). Stateless HTTP
   * does not; a turn without progress then runs without listening to its events.
   */
  cancellation?: boolean
}

interface Tool<S extends TSchema = TSchema> {
  description: string
  schema: S
  annotations?: ToolAnnotations
  run(args: Static<S>, ctx: CallContext, extra: Extra): Promise<{ result: object; text: string }>
}
const tool = <S extends TSchema>(t: Tool<S>): Tool<S> => t

const INSTRUCTIONS =
  'Burrow runs LLM agent sessions. Create a session (session_create), then run turns on it ' +
  '(turn_run); the session keeps the history, compacts it when it grows long and can recall compacted history ' +
  '(memory_search). Errors come back as tool errors with a stable code, e.g. error[SESSION_NOT_FOUND].'

/** A `tools/call` as the server answers it (also thrown: McpError for an unknown tool). */
export type McpToolCall = (
  params: { name: string; arguments?: Record<string, unknown> | undefined },
  extra: Extra,
) => Promise<CallToolResult>
const toolCalls = new WeakMap<Server, McpToolCall>()

/**
 * The server's `tools/call` handler itself, for a transport that dispatches tool calls
 * without the SDK's generic request path (see mcp-http-transport.ts).
 */
export function toolCallOf(mcp: Server): McpToolCall {
  const f = toolCalls.get(mcp)
  if (!f) throw new Error('not a server made by createMcpServer')
  return f
}

/**
 * One JSON Schema validator for every server: the SDK otherwise builds an Ajv instance per
 * server (~1 ms), and HTTP builds a server per request. It is only used for elicitation
 * replies, which Burrow does not request, and it caches compiled schemas, so sharing is safe.
 */
let validator: AjvJsonSchemaValidator | undefined

/** Builds the MCP server; `ctxFor` is asked once per tool call. */
export function createMcpServer(service: SessionOperations, ctxFor: McpCallContext, opts: McpServerOptions = {}): Server {
  const mcp = new Server(
    { name: 'burrow', version: opts.version ?? '0.0.0' },
    {
      capabilities: { tools: {} },
      instructions: INSTRUCTIONS,
      jsonSchemaValidator: (validator ??= new AjvJsonSchemaValidator()),
    },
  )
  const turn = (op: 'startTurn' | 'resume') => async (a: Static<typeof SessionTurnSchema>, ctx: CallContext, extra: Extra) => {
    const { session_id: id, ...req } = a
    const result = await runTurn(service, op, id, req, ctx, extra, opts.cancellation ?? true)
    return { result, text: turnText(result) }
  }

  const tools: Record<string, Tool> = {
    session_create: tool({
      description:
        'Create an agent session (history, model, system prompt, client tools, budget). Returns session_id and the effective configuration.',
      schema: CreateSessionSchema,
      run: async (a, ctx) => {
        const r = await service.createSession(a, ctx)
        return { result: r, text: `Created session ${r.session_id} (model ${r.model}).` }
      },
    }),
    turn_run: tool({
      description:
        'Run one agent turn on a session: send `input` (a user message) and get the assistant answer (output_text). ' +
        'When the turn calls client tools it ends with status "requires_action" and tool_calls; answer them with turn_run ' +
        '`tool_results` to continue. Sends progress notifications (streamed text, tool calls) when given a progressToken.',
      schema: SessionTurnSchema,
      annotations: { openWorldHint: true },
      run: turn('startTurn'),
    }),
    session_resume: tool({
      description:
        'Continue a persisted session (also after a server restart): optionally with a new `input`; ' +
        'without one the agent answers the last user message. Needs session persistence.',
      schema: SessionTurnSchema,
      annotations: { openWorldHint: true },
      run: turn('resume'),
    }),
    session_read: tool({
      description: 'Read a session: status, configuration, full message history, usage, compaction state. Needs session persistence.',
      schema: SessionRefSchema,
      annotations: { readOnlyHint: true },
      run: async (a, ctx) => {
        const v = await service.read(a.session_id, ctx)
        return {
          result: v,
          text: `Session ${v.session_id} (${v.status}, ${v.model}): ${v.turn_count} turns, ${v.messages.length} messages.`,
        }
      },
    }),
    session_list: tool({
      description:
        'List your sessions, newest first, a page at a time (pass next_cursor as cursor for the next page; a filtered page may hold ' +
        'fewer items and still have one). Filter by status, metadata (every KEY: VALUE pair) and created_/updated_ after/before ' +
        'instants. Needs session persistence.',
      schema: SessionQuerySchema,
      annotations: { readOnlyHint: true },
      run: async (a, ctx) => {
        const p = await service.list(a, ctx)
        const lines = p.items.map((s) => `${s.session_id} ${s.status} ${s.model} turns=${s.turn_count}`)
        if (p.next_cursor) lines.push(`next_cursor: ${p.next_cursor}`)
        return { result: p, text: [`${p.items.length} session(s).`, ...lines].join('\n') }
      },
    }),
    session_fork: tool({
      description:
        "Fork a session: a new session whose history is this one's up to event at_seq (default: the last), to try another " +
        'path from there (rewind) without touching the original. A turn open at that point is closed in the fork. Needs session persistence.',
      schema: SessionForkSchema,
      annotations: { destructiveHint: false },
      run: async ({ session_id, ...req }, ctx) => {
        const v = await service.forkSession(session_id, req, ctx)
        return { result: v, text: `Forked session ${session_id} at seq ${v.forked_from!.seq} into ${v.session_id}.` }
      },
    }),
    session_update: tool({
      description:
        "Change a session's metadata (merged: a key set to null is removed), system_prompt, tools or compaction settings. " +
        'Recorded in the log and effective from the next turn; only metadata may change while a turn is open. Needs session persistence.',
      schema: SessionUpdateSchema,
      annotations: { idempotentHint: true, destructiveHint: false },
      run: async ({ session_id, ...req }, ctx) => {
        const v = await service.updateSession(session_id, req, ctx)
        return { result: v, text: `Updated session ${v.session_id} (${Object.keys(req).join(', ')}).` }
      },
    }),
    session_archive: tool({
      description: 'Archive a session: it stays readable but accepts no more turns. Needs session persistence.',
      schema: SessionRefSchema,
      annotations: { idempotentHint: true, destructiveHint: false },
      run: async (a, ctx) => {
        await service.archive(a.session_id, ctx)
        return { result: { session_id: a.session_id, status: 'archived' }, text: `Archived session ${a.session_id}.` }
      },
    }),
    memory_search: tool({
      description:
        'Search semantic memory (history that compaction moved out of sessions, and added entries) across your ' +
        'sessions or within one, optionally only entries with given metadata. Returns hits with id, content, score (0..1), ' +
        'session_id, turn, seq and metadata. Needs the memory store.',
      schema: MemorySearchQuerySchema,
      annotations: { readOnlyHint: true },
      run: async (a, ctx) => {
        const r = await service.searchMemory(a, ctx)
        const lines = r.results.map((h) => `[${h.score.toFixed(2)}] ${h.content.length > 200 ? `${h.content.slice(0, 200)}…` : h.content}`)
        return { result: r, text: [`${r.results.length} hit(s).`, ...lines].join('\n') }
      },
    }),
    memory_list: tool({
      description:
        'List your memory entries in insertion order, a page at a time (pass next_cursor as cursor), optionally ' +
        "one session's or those with given metadata. Needs the memory store.",
      schema: MemoryPageQuerySchema,
      annotations: { readOnlyHint: true },
      run: async (a, ctx) => {
        const p = await service.listMemory(a, ctx)
        const lines = p.items.map((e) => `${e.id} ${e.content.length > 80 ? `${e.content.slice(0, 80)}…` : e.content}`)
        if (p.next_cursor) lines.push(`next_cursor: ${p.next_cursor}`)
        return { result: p, text: [`${p.items.length} entr${p.items.length === 1 ? 'y' : 'ies'}.`, ...lines].join('\n') }
      },
    }),
    memory_get: tool({
      description: 'Read one memory entry by id (error[MEMORY_NOT_FOUND] when you have none with it). Needs the memory store.',
      schema: MemoryRefSchema,
      annotations: { readOnlyHint: true },
      run: async (a, ctx) => {
        const e = await service.getMemory(a.id, ctx)
        return { result: e, text: e.content }
      },
    }),
    memory_delete: tool({
      description: 'Delete one memory entry by id: it is no longer found by search or listed. Needs the memory store.',
      schema: MemoryRefSchema,
      annotations: { destructiveHint: true, idempotentHint: false },
      run: async (a, ctx) => {
        await service.deleteMemory(a.id, ctx)
        return { result: { id: a.id, deleted: true }, text: `Deleted memory entry ${a.id}.` }
      },
    }),
    capabilities_get: tool({
      description: "The server's capabilities (session_store, memory_store, session_compaction), version, auth and LLM providers.",
      schema: NoParamsSchema,
      annotations: { readOnlyHint: true },
      run: async (_a, ctx) => {
        const c = await service.getCapabilities(ctx)
        return {
          result: c,
          text: `Burrow ${c.version}: session_store=${c.session_store} memory_store=${c.memory_store} session_compaction=${c.session_compaction}`,
        }
      },
    }),
  }

  const call = async (t: Tool, args: unknown, extra: Extra): Promise<CallToolResult> => {
    const ctx: CallContext = { ...ctxFor(extra) }
    try {
      const { result, text } = await t.run(args, ctx, extra)
      return { content: [{ type: 'text', text }], structuredContent: result as Record<string, unknown> }
    } catch (err) {
      const e = toBurrowError(err)
      if (e.code === 'INTERNAL') opts.logError?.(err, ctx.requestId)
      const message = e.code === 'INTERNAL' ? ERROR_TABLE.INTERNAL.message : e.message
      const data = e.code === 'INTERNAL' ? {} : e.data
      return {
        isError: true,
        content: [{ type: 'text', text: `error[${e.code}]: ${message}` }],
        structuredContent: { ...data, code: e.code, message },
      }
    }
  }

  // What tools/list serves: each tool's input schema as plain JSON Schema, made once.
  const listed: ListedTool[] = Object.entries(tools).map(([name, t]) => ({
    name,
    description: t.description,
    inputSchema: JSON.parse(JSON.stringify(t.schema)) as ListedTool['inputSchema'],
    annotations: t.annotations,
    execution: { taskSupport: 'forbidden' },
  }))
  const checks = new Map(Object.entries(tools).map(([name, t]) => [name, argumentsCheck(t.schema, 'arguments')]))
  const callTool: McpToolCall = async (params, extra) => {
    const t = Object.hasOwn(tools, params.name) ? tools[params.name] : undefined
    if (!t) throw new McpError(JSON_RPC.INVALID_PARAMS, `Unknown tool: ${params.name}`)
    const args = params.arguments ?? {}
    try {
      checks.get(params.name)!(args)
    } catch (err) {
      const e = toBurrowError(err)
      return {
        isError: true,
        content: [{ type: 'text', text: `error[${e.code}]: ${e.message}` }],
        structuredContent: { ...e.data, code: e.code, message: e.message },
      }
    }
    return track(mcp, call(t, args, extra))
  }
  mcp.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listed }))
  mcp.setRequestHandler(CallToolRequestSchema, (req, extra) => callTool(req.params, extra))
  toolCalls.set(mcp, callTool)
  return mcp
}

/** Runs a turn, reporting progress to the caller; a cancelled call interrupts its turn. */
async function runTurn(
  service: SessionOperations,
  op: 'startTurn' | 'resume',
  id: string,
  req: StartTurn,
  ctx: CallContext,
  extra: Extra,
  cancellation: boolean,
): Promise<TurnResult> {
  const progress = progressReporter(extra)
  if (!progress && !cancellation) return service[op](id, req, ctx)
  let started = false
  ctx.onEvent = (e) => {
    started = true
    progress?.onEvent(e)
  }
  if (progress) ctx.onQueued = (position) => progress.onQueued(position)
  const onAbort = () => {
    if (started) service.interrupt(id, { apiKey: ctx.apiKey, requestId: ctx.requestId }).catch(() => {})
  }
  extra.signal.addEventListener('abort', onAbort, { once: true })
  try {
    return await service[op](id, req, ctx)
  } finally {
    extra.signal.removeEventListener('abort', onAbort)
    await progress?.done()
  }
}

function turnText(r: TurnResult): string {
  if (r.status !== 'requires_action') return r.output_text.length > 0 ? r.output_text : `(turn ${r.turn} ended without text)`
  const calls = r.tool_calls.map((c) => `${c.name} (id ${c.id}): ${JSON.stringify(c.input)}`)
  return [r.output_text, `Turn ${r.turn} is waiting for client tool results (send them with turn_run tool_results):`, ...calls]
    .filter((l) => l.length > 0)
    .join('\n')
}

// Tool calls in flight per server, so a transport can let them finish before it closes.
const inFlight = new WeakMap<Server, Set<Promise<unknown>>>()

function track<T>(mcp: Server, p: Promise<T>): Promise<T> {
  let set = inFlight.get(mcp)
  if (!set) inFlight.set(mcp, (set = new Set()))
  set.add(p)
  const s = set
  void p.finally(() => s.delete(p)).catch(() => {})
  return p
}

/** Resolves once no tool call of this server is running (for a graceful end of a stdio session). */
export async function mcpIdle(mcp: Server): Promise<void> {
  for (let set = inFlight.get(mcp); set && set.size > 0; set = inFlight.get(mcp)) await Promise.allSettled([...set])
}
