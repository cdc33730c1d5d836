import type { EventData, EventEnvelope } from '../core/events.js'
import type { ContentBlock } from '../core/messages.js'

/**
 * The human-readable transcript of a session, one piece per stored event. The file is
 * the concatenation of `renderEvent` over the log in order, so appending the pieces of
 * new events gives byte for byte what a rebuild from scratch gives.
 */
export function renderEvent(e: EventEnvelope): string {
  switch (e.type) {
    case 'session_created': {
      const c = (e.data as EventData['session_created']).config
      const meta = Object.entries(c.metadata)
        .map(([k, v]) => `${k}=${v}`)
        .join(', ')
      return (
        `# Session ${e.session_id}\n\n- created: ${e.at}\n- model: \`${c.model}\`\n` +
        (meta ? `- metadata: ${meta}\n` : '') +
        (c.tools.length > 0 ? `- client tools: ${c.tools.map((t) => `\`${t.name}\``).join(', ')}\n` : '') +
        (c.system_prompt ? `\n**System prompt**\n\n${quote(c.system_prompt)}\n` : '')
      )
    }
    case 'turn_started': {
      const d = e.data as EventData['turn_started']
      if (d.continuation) return `\n_Turn ${e.turn} continues with tool results (${e.at})._\n`
      return (
        `\n## Turn ${e.turn}\n\n_${e.at}_\n` +
        (d.input ? `\n**User**\n\n${quote(blocksText(d.input))}\n` : '\n_(no new input: the model answers the history)_\n')
      )
    }
    case 'assistant_message': {
      const d = e.data as EventData['assistant_message']
      const text = blocksText(d.message.content.filter((b) => b.type === 'text'))
      return text ? `\n**Assistant**\n\n${quote(text)}\n` : ''
    }
    case 'tool_call': {
      const d = e.data as EventData['tool_call']
      return `\n- tool call \`${d.name}\` (\`${d.id}\`, ${d.executor}): \`${oneLine(JSON.stringify(d.input ?? {}))}\`\n`
    }
    case 'tool_result': {
      const d = e.data as EventData['tool_result']
      const content = typeof d.content === 'string' ? d.content : blocksText(d.content)
      return `- tool result for \`${d.tool_call_id}\`${d.is_error ? ' (error)' : ''}${d.synthetic ? ' (synthetic)' : ''}: ${oneLine(content)}\n`
    }
    case 'turn_requires_action': {
      const d = e.data as EventData['turn_requires_action']
      return `\n_Turn ${e.turn} paused: waiting for results of ${d.tool_calls.map((c) => `\`${c.id}\``).join(', ')}._\n`
    }
    case 'turn_completed': {
      const d = e.data as EventData['turn_completed']
      return `\n_Turn ${e.turn} completed (${d.stop_reason}): ${d.usage.input_tokens} input / ${d.usage.output_tokens} output tokens._\n`
    }
    case 'turn_failed': {
      const d = e.data as EventData['turn_failed']
      return `\n_Turn ${e.turn} failed: ${d.code}${d.reason ? ` (${d.reason})` : ''}: ${oneLine(d.message)}_\n`
    }
    case 'compaction_started': {
      const d = e.data as EventData['compaction_started']
      return `\n---\n\n_Compaction started: ${d.message_count} messages, ~${d.estimated_history_tokens} tokens of history._\n`
    }
    case 'compaction_completed': {
      const d = e.data as EventData['compaction_completed']
      const range = d.discarded_seq_range
        ? `; events ${d.discarded_seq_range[0]}–${d.discarded_seq_range[1]} left the context (they stay in the log)`
        : ''
      return `\n**Compaction** — ${d.messages_before} → ${d.messages_after} messages, summary of ${d.summary_tokens} tokens${range}:\n\n${quote(d.summary)}\n\n---\n`
    }
    case 'compaction_failed': {
      const d = e.data as EventData['compaction_failed']
      return `\n_Compaction failed: ${oneLine(d.error)}; the history was left as it was._\n\n---\n`
    }
    case 'memory_indexed':
      return `\n_${(e.data as EventData['memory_indexed']).entries} passages indexed into memory._\n`
    case 'session_archived':
      return `\n_Session archived at ${e.at}._\n`
    case 'session_updated':
      return `\n_Settings changed at ${e.at}: ${Object.keys((e.data as EventData['session_updated']).changes).join(', ')}._\n`
    default:
      return ''
  }
}

function blocksText(blocks: readonly ContentBlock[]): string {
  return blocks
    .map((b) => (b.type === 'text' ? b.text : b.type === 'image' ? '[image]' : ''))
    .filter(Boolean)
    .join('\n')
}

function quote(text: string): string {
  return text
    .split('\n')
    .map((l) => (l ? `> ${l}` : '>'))
    .join('\n')
}

function oneLine(text: string): string {
  const s = text.replace(/\s+/g, ' ').trim()
  return s.length > 500 ? `${s.slice(0, 500)}…` : s
}
