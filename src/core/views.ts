import type { SessionRecord } from './session-record.js'
import type { SessionCreated, SessionSummary, SessionView } from './wire.js'

/** The public shapes of a session record (docs/api.md, The session view). */
export function toCreated(r: SessionRecord): SessionCreated {
  const c = r.config
  return {
    session_id: r.session_id,
    status: r.status,
    created_at: r.created_at,
    model: c.model,
    system_prompt: c.system_prompt,
    metadata: { ...c.metadata },
    memory: c.memory,
    compaction: c.compaction ? { ...c.compaction } : null,
    tools: structuredClone(c.tools),
    max_total_tokens: c.max_total_tokens,
    model_settings: structuredClone(c.model_settings ?? {}),
  }
}

/**
 * The session view. Callers get copies they may change; `share` hands out the record's own
 * messages, tools and stats instead — only for a view that is serialized at once and dropped.
 */
export function toView(r: SessionRecord, running: boolean, share = false): SessionView {
  const c = r.config
  const copy = share ? <T>(v: T): T => v : <T>(v: T): T => structuredClone(v)
  const pending =
    r.open_turn?.state === 'requires_action'
      ? r.open_turn.pending_tool_calls.filter(
          (p) => r.open_turn!.client_tool_call_ids.includes(p.id) && !r.open_turn!.results.some((x) => x.tool_use_id === p.id),
        )
      : []
  return {
    session_id: r.session_id,
    status: r.status,
    created_at: r.created_at,
    updated_at: r.updated_at,
    model: c.model,
    system_prompt: c.system_prompt,
    metadata: { ...c.metadata },
    messages: copy(r.messages),
    turn_count: r.turn_count,
    usage: { ...r.usage, by_turn: r.usage_by_turn.map((t) => ({ ...t })) },
    tool_stats: copy(r.tool_stats),
    compaction: c.compaction
      ? {
          config: { ...c.compaction },
          session_boundary_index: r.session_boundary_index,
          last_compaction_boundary_index: r.last_compaction_boundary_index,
          compactions: r.compactions,
        }
      : null,
    memory: c.memory,
    tools: copy(c.tools),
    max_total_tokens: c.max_total_tokens,
    model_settings: copy(c.model_settings ?? {}),
    pending_tool_calls: copy(pending),
    running,
    notes: r.notes.map((n) => ({ ...n })),
    last_seq: r.last_seq,
    forked_from: c.forked_from ? { ...c.forked_from } : null,
  }
}

export function toSummary(
  r: Pick<SessionRecord, 'session_id' | 'status' | 'created_at' | 'updated_at' | 'config' | 'turn_count' | 'last_seq'>,
): SessionSummary {
  return {
    session_id: r.session_id,
    status: r.status,
    created_at: r.created_at,
    updated_at: r.updated_at,
    model: r.config.model,
    metadata: { ...r.config.metadata },
    turn_count: r.turn_count,
    last_seq: r.last_seq,
    forked_from: r.config.forked_from ? { ...r.config.forked_from } : null,
  }
}
