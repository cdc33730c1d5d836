// A session's full event log as turns: what the user sent, the model's text (streamed live),
// tool calls and results, failures with their code, and each compaction with what it discarded.
import { useState } from 'preact/hooks'
import { api } from './api.js'
import { Badge, ErrorNote, html, textOf, time } from './ui.js'

/** Events grouped by turn, in log order (turn 0: the session's own events). */
function byTurn(events) {
  const turns = new Map()
  for (const e of events) {
    if (!turns.has(e.turn)) turns.set(e.turn, [])
    turns.get(e.turn).push(e)
  }
  return [...turns]
}

export function Timeline({ sessionId, events, streaming, highlight }) {
  return html`<div aria-label="Timeline">
    ${byTurn(events).map(([turn, list]) => {
      const end = list.find((e) => e.type === 'turn_completed' || e.type === 'turn_failed')
      const cls = end ? (end.type === 'turn_failed' ? 'turn failed' : 'turn done') : 'turn'
      return html`<section class=${cls} key=${turn} aria-label=${turn === 0 ? 'Session' : `Turn ${turn}`}>
        <div class="small muted">${turn === 0 ? 'Session' : `Turn ${turn}`}</div>
        ${list.map((e) => html`<${EventRow} key=${e.seq} sessionId=${sessionId} e=${e} highlight=${highlight === e.seq} />`)}
        ${streaming[turn] ? html`<div class="msg streaming" data-testid="streaming" aria-live="polite">${streaming[turn]}</div>` : null}
      </section>`
    })}
  </div>`
}

function EventRow({ sessionId, e, highlight }) {
  const d = e.data || {}
  let body = null
  switch (e.type) {
    case 'session_created':
      body = html`<span class="small">created · model <code>${d.config?.model}</code></span>`
      break
    case 'turn_started':
      body = d.input ? html`<div class="msg user">${textOf(d.input)}</div>` : html`<span class="small muted">continued with tool results</span>`
      break
    case 'assistant_message':
      body = html`<div class="msg assistant">${textOf(d.message?.content)}</div>`
      break
    case 'tool_call':
      body = html`<div class="small">tool call <strong>${d.name}</strong> <${Badge}>${d.executor}<//><pre>${JSON.stringify(d.input, null, 2)}</pre></div>`
      break
    case 'tool_result':
      body = html`<div class="small">
        result of <strong>${d.name}</strong> ${d.is_error ? html`<${Badge} kind="bad">error<//>` : null}
        ${d.synthetic ? html`<${Badge} kind="warn">synthetic<//>` : null}
        <pre>${textOf(d.content)}</pre>
      </div>`
      break
    case 'turn_requires_action':
      body = html`<span class="small"><${Badge} kind="warn">waiting for tool results<//> ${d.tool_calls?.map((c) => c.name).join(', ')}</span>`
      break
    case 'turn_completed':
      body = html`<span class="small"
        ><${Badge} kind="ok">completed<//> ${d.usage?.input_tokens ?? 0} in / ${d.usage?.output_tokens ?? 0} out · ${d.stop_reason}</span
      >`
      break
    case 'turn_failed':
      body = html`<span class="small"><${Badge} kind="bad">${d.code}<//> ${d.message}${d.reason ? ` (${d.reason})` : ''}</span>`
      break
    case 'compaction_completed':
      body = html`<${CompactionCard} sessionId=${sessionId} d=${d} />`
      break
    case 'compaction_started':
      body = html`<span class="small muted">compaction started · ${d.message_count} messages, ~${d.estimated_history_tokens} tokens</span>`
      break
    case 'compaction_failed':
      body = html`<span class="small"><${Badge} kind="bad">compaction failed<//> ${d.error}</span>`
      break
    case 'memory_indexed':
      body = html`<span class="small muted">${d.entries} passages indexed into memory</span>`
      break
    case 'note_set':
      body = html`<span class="small">note <code>${d.key}</code> = ${d.value} <span class="muted">(${d.by})</span></span>`
      break
    case 'note_deleted':
      body = html`<span class="small">note <code>${d.key}</code> deleted <span class="muted">(${d.by})</span></span>`
      break
    case 'session_archived':
      body = html`<${Badge} kind="warn">archived<//>`
      break
    default:
      body = html`<span class="small">${e.type}</span>`
  }
  return html`<div id=${`seq-${e.seq}`} class=${highlight ? 'event highlight' : 'event'} data-seq=${e.seq} data-type=${e.type}>
    <div class="meta">#${e.seq} · ${e.type} · ${time(e.at)}</div>
    ${body}
  </div>`
}

/**
 * A compaction: its summary, the history's size before and after, and the seq range it
 * discarded — expandable into those events' messages, verbatim, read from the event log.
 */
function CompactionCard({ sessionId, d }) {
  const [discarded, setDiscarded] = useState(null)
  const [error, setError] = useState(null)
  const [from, to] = d.discarded_seq_range || [0, 0]
  const load = async (ev) => {
    if (!ev.currentTarget.open || discarded) return
    try {
      const out = []
      let after = from - 1
      while (after < to) {
        const page = await api.get(`/v1/sessions/${sessionId}/event-log?after=${after}&limit=${Math.min(1000, to - after)}`)
        if (page.events.length === 0) break
        for (const e of page.events) if (e.seq <= to) out.push(e)
        after = page.events[page.events.length - 1].seq
      }
      setDiscarded(out)
    } catch (err) {
      setError(err)
    }
  }
  return html`<div class="compaction" data-testid="compaction">
    <div><strong>Compaction</strong> · ${d.messages_before} → ${d.messages_after} messages · discarded seq ${from}–${to} · summary ${d.summary_tokens} tokens</div>
    <details>
      <summary>Summary</summary>
      <div class="msg">${d.summary}</div>
    </details>
    <details onToggle=${load}>
      <summary>Discarded messages (seq ${from}–${to})</summary>
      <${ErrorNote} error=${error} />
      ${discarded === null
        ? html`<p class="small muted">Loading from the event log…</p>`
        : html`<ol class="history" data-testid="discarded">
            ${discarded.flatMap((e) => discardedMessages(e))}
          </ol>`}
    </details>
  </div>`
}

/** The messages an event put into the history (what a compaction can discard). */
function discardedMessages(e) {
  const d = e.data || {}
  const item = (role, text) => html`<li key=${`${e.seq}-${role}`} data-seq=${e.seq}><strong>${role}</strong> <span class="small muted">#${e.seq}</span><div class="msg">${text}</div></li>`
  if (e.type === 'turn_started' && d.input) return [item('user', textOf(d.input))]
  if (e.type === 'assistant_message') return [item('assistant', textOf(d.message?.content))]
  if (e.type === 'tool_result') return [item('tool', textOf(d.content))]
  return []
}
