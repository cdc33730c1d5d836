// Shared pieces of the console's views: the template tag, formatting, small components.
import { h } from 'preact'
import htm from 'htm'

export const html = htm.bind(h)

export function time(iso) {
  if (!iso) return ''
  const d = new Date(iso)
  return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' })
}

export function dateTime(iso) {
  return iso ? new Date(iso).toLocaleString() : ''
}

export function shortId(id) {
  return id ? `${id.slice(0, 8)}…${id.slice(-4)}` : ''
}

/** The text of message content: a string, or blocks (text, tool use, tool result, image). */
export function textOf(content) {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content
    .map((b) => {
      if (b.type === 'text') return b.text
      if (b.type === 'tool_use') return `→ ${b.name}(${JSON.stringify(b.input)})`
      if (b.type === 'tool_result') return `← ${textOf(b.content)}`
      if (b.type === 'image') return '[image]'
      return ''
    })
    .filter(Boolean)
    .join('\n')
}

export function ErrorNote({ error }) {
  if (!error) return null
  const code = error.code ? html`<strong>${error.code}</strong>: ` : ''
  return html`<div class="error" role="alert">${code}${error.message}</div>`
}

export function Badge({ kind = '', children }) {
  return html`<span class=${`badge ${kind}`}>${children}</span>`
}

/** A one-line summary of an event for lists (the activity feed). */
export function summary(e) {
  const d = e.data || {}
  switch (e.type) {
    case 'turn_started':
      return d.input ? `“${clip(textOf(d.input), 80)}”` : 'continuation'
    case 'assistant_message':
      return clip(textOf(d.message?.content), 80)
    case 'turn_completed':
      return `${clip(d.output_text || '', 60)} · ${d.usage?.input_tokens ?? 0} in / ${d.usage?.output_tokens ?? 0} out`
    case 'turn_failed':
      return `${d.code}: ${clip(d.message || '', 80)}`
    case 'tool_call':
      return `${d.name} (${d.executor})`
    case 'tool_result':
      return `${d.name}${d.is_error ? ' (error)' : ''}: ${clip(textOf(d.content), 60)}`
    case 'compaction_completed':
      return `${d.messages_before} → ${d.messages_after} messages`
    case 'note_set':
      return `${d.key} = ${clip(d.value, 40)}`
    case 'note_deleted':
      return d.key
    default:
      return ''
  }
}

export function clip(s, n) {
  s = String(s ?? '')
  return s.length > n ? `${s.slice(0, n - 1)}…` : s
}

