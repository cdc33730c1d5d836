import type { MemoryStore } from '../core/memory-store.js'
import type { BuiltinTool, ToolOutput } from '../core/tools.js'
import { BurrowError } from '../core/errors.js'
import { NO_TRACING, type Tracer } from '../core/tracing.js'
import { tracedSearch } from './memory-ops.js'

/** Added to the system prompt of sessions with memory on. */
export const MEMORY_GUIDE = `You have long-term memory. Earlier parts of this conversation that were compacted away, and other conversations of this workspace, can be searched with the memory_search tool (query; limit, default 5; scope: "session" for this conversation only, "tenant" for all). Search it when the user refers to something you cannot see in the context, before saying you do not know. Each result names the session, turn and event (seq) it came from. Keep short facts you must not lose with note_set (key, value) — notes stay pinned in this prompt — and remove stale ones with note_delete.`

const error = (text: string): ToolOutput => ({ content: text, is_error: true })

/** `memory_search`: hybrid search of the tenant's memory, run inside the agent loop. */
export function memorySearchTool(store: MemoryStore, tracer: Tracer = NO_TRACING): BuiltinTool {
  return {
    definition: {
      name: 'memory_search',
      description:
        'Search long-term memory (earlier, compacted parts of this conversation and other conversations of this workspace). Returns passages with a relevance score and where they came from.',
      input_schema: {
        type: 'object',
        properties: {
          query: { type: 'string', description: 'What to look for: words, names, identifiers or a question.' },
          limit: { type: 'integer', minimum: 1, maximum: 20, description: 'How many results (default 5).' },
          scope: {
            type: 'string',
            enum: ['session', 'tenant'],
            description: '"session": this conversation only; "tenant" (default): every conversation.',
          },
        },
        required: ['query'],
      },
    },
    enabledFor: (s) => s.memory,
    async execute(input, ctx) {
      const i = (input ?? {}) as { query?: unknown; limit?: unknown; scope?: unknown }
      if (typeof i.query !== 'string' || i.query.trim() === '') return error('memory_search needs a non-empty "query" string.')
      const limit = i.limit === undefined ? 5 : i.limit
      if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > 20)
        return error('"limit" must be an integer from 1 to 20.')
      const scope = i.scope === undefined ? 'tenant' : i.scope
      if (scope !== 'session' && scope !== 'tenant') return error('"scope" must be "session" or "tenant".')
      const text = i.query
      const hits = await tracedSearch(tracer, ctx.trace, { source: 'tool', scope: scope === 'session' ? 'session' : 'tenant', limit }, () =>
        store.search({
          tenant: ctx.tenant,
          text,
          limit,
          ...(scope === 'session' ? { sessionId: ctx.sessionId } : {}),
        }),
      )
      return {
        content: JSON.stringify(
          hits.map((h) => ({
            content: h.entry.content,
            score: Math.round(h.score * 1000) / 1000,
            session_id: h.entry.session_id,
            turn: h.entry.turn,
            seq: h.entry.seq,
          })),
        ),
      }
    },
  }
}

/** `note_set` / `note_delete`: the agent edits the session notes pinned in its system prompt. */
export function noteTools(): BuiltinTool[] {
  const wrap = async (f: () => Promise<string>): Promise<ToolOutput> => {
    try {
      return { content: await f() }
    } catch (err) {
      if (err instanceof BurrowError && err.code === 'INVALID_REQUEST') return error(err.message)
      throw err
    }
  }
  return [
    {
      definition: {
        name: 'note_set',
        description:
          'Keep a short fact in the session notes (pinned in your instructions, kept across compaction). Setting an existing key replaces it.',
        input_schema: {
          type: 'object',
          properties: {
            key: { type: 'string', description: 'Short name: letters, digits, _ . : -' },
            value: { type: 'string', description: 'At most 2000 characters.' },
          },
          required: ['key', 'value'],
        },
      },
      enabledFor: (s) => s.memory,
      execute: (input, ctx) => {
        const i = (input ?? {}) as { key?: unknown; value?: unknown }
        if (typeof i.key !== 'string' || typeof i.value !== 'string')
          return Promise.resolve(error('note_set needs string "key" and "value".'))
        return wrap(async () => {
          await ctx.session.setNote(i.key as string, i.value as string)
          return `Noted ${i.key as string}.`
        })
      },
    },
    {
      definition: {
        name: 'note_delete',
        description: 'Remove a session note by key.',
        input_schema: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
      },
      enabledFor: (s) => s.memory,
      execute: (input, ctx) => {
        const i = (input ?? {}) as { key?: unknown }
        if (typeof i.key !== 'string') return Promise.resolve(error('note_delete needs a string "key".'))
        return wrap(async () =>
          (await ctx.session.deleteNote(i.key as string)) ? `Deleted ${i.key as string}.` : `There was no note ${i.key as string}.`,
        )
      },
    },
  ]
}
