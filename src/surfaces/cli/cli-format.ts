import type { EventEnvelope } from '../../core/events.js'
import { type ContentBlock, type Message, textOf } from '../../core/messages.js'
import type { MemoryItem, MemorySearchResult, Page, SessionSummary, SessionView, TurnResult } from '../../core/wire.js'

/** Human output of the CLI. Machine output (`--json`) is the service's results as they are. */

export function sessionTable(page: Page<SessionSummary>): string {
  if (page.items.length === 0) return 'No sessions.\n'
  const rows = [
    ['SESSION', 'STATUS', 'TURNS', 'UPDATED', 'MODEL'],
    ...page.items.map((s) => [s.session_id, s.status, String(s.turn_count), s.updated_at, s.model]),
  ]
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  const lines = rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  '))
  if (page.next_cursor) lines.push(`More: --cursor ${page.next_cursor}`)
  return `${lines.join('\n')}\n`
}

export function sessionText(v: SessionView): string {
  const out = [
    `Session ${v.session_id} (${v.status}${v.running ? ', a turn is running' : ''})`,
    `  model      ${v.model}`,
    `  created    ${v.created_at}   updated ${v.updated_at}`,
    `  turns      ${v.turn_count}   tokens in ${v.usage.input_tokens}, out ${v.usage.output_tokens}, compaction ${v.usage.compaction_tokens}`,
  ]
  if (v.compaction)
    out.push(`  compaction ${v.compaction.compactions} so far, threshold ${v.compaction.config.auto_compact_threshold} tokens`)
  if (v.system_prompt) out.push(`  system     ${oneLine(v.system_prompt, 200)}`)
  for (const [k, val] of Object.entries(v.metadata)) out.push(`  meta       ${k}=${val}`)
  for (const n of v.notes) out.push(`  note       ${n.key}: ${oneLine(n.value, 200)}`)
  if (v.pending_tool_calls.length > 0)
    out.push(`  waiting on client tools: ${v.pending_tool_calls.map((c) => `${c.name} (${c.id})`).join(', ')}`)
  out.push('')
  for (const m of v.messages) out.push(messageText(m), '')
  return `${out.join('\n')}\n`
}

function messageText(m: Message): string {
  const head = m.role === 'user' && m.content.every((b) => b.type === 'tool_result') ? '── tool results' : `── ${m.role}`
  return [head, ...m.content.map(blockText)].join('\n')
}

function blockText(b: ContentBlock): string {
  switch (b.type) {
    case 'text':
      return b.text
    case 'image':
      return `[image ${b.source.type === 'url' ? b.source.url : b.source.media_type}]`
    case 'tool_use':
      return `[tool call ${b.name} ${oneLine(JSON.stringify(b.input), 300)} (${b.id})]`
    case 'tool_result':
      return `[tool result ${b.tool_use_id}${b.is_error ? ', error' : ''}] ${oneLine(textOf(b.content), 300)}`
  }
}

export function memoryText(r: MemorySearchResult): string {
  if (r.results.length === 0) return 'No results.\n'
  return `${r.results.map((h) => `${h.score.toFixed(3)}  ${h.id}  ${where(h)}${metaText(h.metadata)}\n       ${oneLine(h.content, 400)}`).join('\n')}\n`
}

export function memoryTable(p: Page<MemoryItem>): string {
  const rows = p.items.map((e) => `${e.id}  ${where(e)}${metaText(e.metadata)}\n    ${oneLine(e.content, 200)}`)
  if (p.items.length === 0) rows.push('No entries.')
  if (p.next_cursor) rows.push(`next: --cursor ${p.next_cursor}`)
  return `${rows.join('\n')}\n`
}

export function memoryItemText(e: MemoryItem): string {
  return `${e.id}  ${where(e)}  ${e.created_at}${metaText(e.metadata)}\n${e.content}\n`
}

function where(h: { session_id: string | null; turn: number | null }): string {
  return h.session_id ? `session ${h.session_id}${h.turn !== null ? `, turn ${h.turn}` : ''}` : 'tenant memory'
}

function metaText(m: Record<string, string>): string {
  const pairs = Object.entries(m).map(([k, v]) => `${k}=${v}`)
  return pairs.length > 0 ? `  [${pairs.join(' ')}]` : ''
}

/**
 * What `run` and `resume` show besides the streamed text (on stderr, so stdout stays the
 * answer): tool calls and results, compaction, and the end of the turn.
 */
export function eventNotice(e: EventEnvelope): string | undefined {
  switch (e.type) {
    case 'tool_call': {
      const d = e.data as EventEnvelope<'tool_call'>['data']
      return `[tool ${d.name} ${oneLine(JSON.stringify(d.input), 200)}${d.executor === 'client' ? ' — for the client' : ''}]`
    }
    case 'tool_result': {
      const d = e.data as EventEnvelope<'tool_result'>['data']
      return `[tool ${d.name} ${d.is_error ? 'failed' : 'returned'}: ${oneLine(textOf(d.content), 200)}]`
    }
    case 'compaction_started': {
      const d = e.data as EventEnvelope<'compaction_started'>['data']
      return `[compaction started: ${d.message_count} messages, about ${d.estimated_history_tokens} tokens of history]`
    }
    case 'compaction_completed': {
      const d = e.data as EventEnvelope<'compaction_completed'>['data']
      return `[compaction completed: ${d.messages_before} messages → ${d.messages_after}, summary of ${d.summary_tokens} tokens]`
    }
    case 'compaction_failed': {
      const d = e.data as EventEnvelope<'compaction_failed'>['data']
      return `[compaction failed${d.code ? ` (${d.code})` : ''}: ${oneLine(d.error, 300)}]`
    }
    default:
      return undefined
  }
}

export function turnFooter(r: TurnResult): string {
  const u = r.usage
  const tokens = `${u.input_tokens} in, ${u.output_tokens} out${u.compaction_tokens ? `, ${u.compaction_tokens} compaction` : ''}`
  const waiting =
    r.status === 'requires_action'
      ? `\nThe turn paused for client tools: ${r.tool_calls.map((c) => `${c.name} (${c.id})`).join(', ')}. Answer them with tool_results over REST or JSON-RPC.`
      : ''
  return `session ${r.session_id} · turn ${r.turn} · ${tokens}${waiting}\n`
}

function oneLine(s: string, max: number): string {
  const flat = s.replace(/\s+/g, ' ').trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}
