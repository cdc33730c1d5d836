import { BurrowError, invalidRequest } from '../core/errors.js'
import type { MemoryEntry, MemoryStore } from '../core/memory-store.js'
import type { Receipt } from './idempotency.js'
import { NO_TRACING, withinSpan, type TraceContext, type Tracer } from '../core/tracing.js'
import type { MemoryAdd, MemoryAdded, MemoryItem, MemoryPageQuery, MemorySearchQuery, MemorySearchResult, Page } from '../core/wire.js'

/** What an add answers. */
function answer(added: readonly MemoryEntry[]): MemoryAdded {
  return { ids: added.map((a) => a.id) }
}

/** Any session id a memory request names must be one of the caller's (else SESSION_NOT_FOUND). */
type Owned = (sessionId: string) => unknown

/**
 * The memory operations of one tenant (what `/v1/memory` and its JSON-RPC, MCP and CLI
 * counterparts do). Another tenant's entry id answers exactly like an unknown one.
 */
export class TenantMemory {
  constructor(
    private readonly store: MemoryStore,
    private readonly tenant: string,
    private readonly owned: Owned,
    private readonly tracer: Tracer = NO_TRACING,
  ) {}

  /** `GET /v1/memory/search`: scoped to the caller's tenant, or to one of its sessions, optionally filtered by metadata. */
  async search(q: MemorySearchQuery, trace?: TraceContext): Promise<MemorySearchResult> {
    const scope = q.scope ?? 'tenant'
    if (scope === 'session' && !q.session_id) throw invalidRequest('query/session_id', "is required with scope 'session'")
    if (q.session_id) await this.owned(q.session_id)
    const limit = q.limit ?? 5
    const hits = await tracedSearch(this.tracer, trace, { source: 'api', scope, limit }, () =>
      this.store.search({
        tenant: this.tenant,
        text: q.q,
        limit,
        ...(q.session_id ? { sessionId: q.session_id } : {}),
        ...(q.metadata ? { metadata: q.metadata } : {}),
      }),
    )
    return {
      results: hits.map((h) => ({
        id: h.entry.id,
        content: h.entry.content,
        score: h.score,
        session_id: h.entry.session_id,
        turn: h.entry.turn,
        seq: h.entry.seq,
        metadata: h.entry.metadata ?? {},
      })),
    }
  }

  /** `POST /v1/memory`: documents or facts added directly, optionally tied to one of the caller's sessions. */
  async add(entries: MemoryAdd, receipt: Receipt | null = null): Promise<MemoryAdded> {
    for (const sid of new Set(entries.flatMap((e) => (e.session_id ? [e.session_id] : [])))) await this.owned(sid)
    // With a key, the store commits the answer with the entries (where it keeps outcomes: MemoryStore.idempotency).
    const outcome =
      receipt && this.store.idempotency ? (added: readonly MemoryEntry[]) => receipt.seal({ ok: true, value: answer(added) }) : undefined
    const added = await this.store.add(
      entries.map((e) => ({
        tenant: this.tenant,
        content: e.content,
        session_id: e.session_id ?? null,
        turn: null,
        seq: null,
        ...(e.metadata ? { metadata: e.metadata } : {}),
      })),
      outcome,
    )
    return answer(added)
  }

  /** `GET /v1/memory`: the tenant's entries in insertion order, a page at a time. */
  async list(q: MemoryPageQuery): Promise<Page<MemoryItem>> {
    if (q.session_id) await this.owned(q.session_id)
    const page = await this.store.list(this.tenant, {
      limit: q.limit ?? 20,
      cursor: q.cursor,
      ...(q.session_id ? { sessionId: q.session_id } : {}),
      ...(q.metadata ? { metadata: q.metadata } : {}),
    })
    return { items: page.items.map(item), next_cursor: page.next_cursor }
  }

  async get(id: string): Promise<MemoryItem> {
    const e = await this.store.get(this.tenant, id)
    if (!e) throw new BurrowError('MEMORY_NOT_FOUND')
    return item(e)
  }

  async delete(id: string): Promise<void> {
    if (!(await this.store.delete(this.tenant, id))) throw new BurrowError('MEMORY_NOT_FOUND')
  }
}

/**
 * Runs a memory search in a `memory_search` span (the REST and RPC search, and the agent's
 * tool): where it came from, its scope and limit, how many results, failures with their code.
 */
export function tracedSearch<T extends readonly unknown[]>(
  tracer: Tracer,
  parent: TraceContext | undefined,
  what: { source: 'api' | 'tool'; scope: string; limit: number },
  run: () => Promise<T>,
): Promise<T> {
  return tracer.enabled ? searchSpan(tracer, parent, what, run) : run()
}

async function searchSpan<T extends readonly unknown[]>(
  tracer: Tracer,
  parent: TraceContext | undefined,
  what: { source: 'api' | 'tool'; scope: string; limit: number },
  run: () => Promise<T>,
): Promise<T> {
  const span = tracer.start('memory_search', parent)
  span.set('burrow.memory.source', what.source)
  span.set('burrow.memory.scope', what.scope)
  span.set('burrow.memory.limit', what.limit)
  if (what.source === 'tool') {
    span.set('gen_ai.operation.name', 'execute_tool')
    span.set('gen_ai.tool.name', 'memory_search')
  }
  return withinSpan(span, async () => {
    const hits = await run()
    span.set('burrow.memory.results', hits.length)
    return hits
  })
}

function item(e: MemoryEntry): MemoryItem {
  return {
    id: e.id,
    content: e.content,
    session_id: e.session_id,
    turn: e.turn,
    seq: e.seq,
    created_at: e.created_at,
    metadata: e.metadata ?? {},
  }
}
