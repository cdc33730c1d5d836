// One session: its timeline (the whole event log, streamed live), the history the model will
// see next beside it, usage per turn, notes, and the composer (run a turn, answer a paused
// turn's tool calls, interrupt, compact).
import { useEffect, useRef, useState } from 'preact/hooks'
import { api } from './api.js'
import { STORED_TYPES } from './event-types.js'
import { Timeline } from './timeline.js'
import { Badge, ErrorNote, html, textOf } from './ui.js'

const REFRESH_ON = new Set([
  'turn_started',
  'turn_completed',
  'turn_failed',
  'turn_requires_action',
  'compaction_completed',
  'note_set',
  'note_deleted',
  'session_archived',
])

export function SessionPage({ id, seq }) {
  const [view, setView] = useState(null)
  const [events, setEvents] = useState([])
  const [streaming, setStreaming] = useState({})
  const [error, setError] = useState(null)
  const [loaded, setLoaded] = useState(false)
  const last = useRef(0)

  const refresh = () =>
    api.get(`/v1/sessions/${id}`).then(
      (v) => setView(v),
      (err) => setError(err),
    )

  useEffect(() => {
    let source = null
    let closed = false
    let retry = null
    let pendingView = null
    const stored = (e) => {
      if (e.seq <= last.current) return
      last.current = e.seq
      setEvents((list) => [...list, e])
      if (e.type === 'assistant_message' || e.type === 'turn_completed' || e.type === 'turn_failed')
        setStreaming((s) => (s[e.turn] ? { ...s, [e.turn]: '' } : s))
      if (REFRESH_ON.has(e.type) && !pendingView) pendingView = setTimeout(() => ((pendingView = null), refresh()), 50)
    }
    const open = () => {
      source = new EventSource(api.streamUrl(`/v1/sessions/${id}/events?after=${last.current}`))
      source.addEventListener('text_delta', (m) => {
        const e = JSON.parse(m.data)
        setStreaming((s) => ({ ...s, [e.turn]: (s[e.turn] || '') + e.data.text }))
      })
      for (const type of STORED_TYPES) source.addEventListener(type, (m) => stored(JSON.parse(m.data)))
      source.onerror = () => {
        if (!closed && source.readyState === EventSource.CLOSED) retry = setTimeout(open, 1000)
      }
    }
    ;(async () => {
      try {
        const v = await api.get(`/v1/sessions/${id}`)
        setView(v)
        // The whole log, a page at a time, then the live tail from where it ends.
        const all = []
        for (;;) {
          const page = await api.get(`/v1/sessions/${id}/event-log?after=${last.current}&limit=1000`)
          for (const e of page.events) all.push(e)
          if (page.events.length === 0) break
          last.current = page.events[page.events.length - 1].seq
          if (last.current >= page.last_seq) break
        }
        setEvents(all)
        setLoaded(true)
        if (!closed) open()
      } catch (err) {
        setError(err)
      }
    })()
    return () => {
      closed = true
      clearTimeout(retry)
      clearTimeout(pendingView)
      source?.close()
    }
  }, [id])

  useEffect(() => {
    if (loaded && seq) document.getElementById(`seq-${seq}`)?.scrollIntoView({ block: 'center' })
  }, [loaded, seq])

  if (error && !view) return html`<${ErrorNote} error=${error} />`
  if (!view) return html`<p class="muted">Loading…</p>`
  return html`<div>
    <h2>Session <span class="mono">${id}</span></h2>
    <p class="small">
      <${Badge} kind=${view.status === 'archived' ? 'warn' : 'ok'}>${view.status}<//> ${view.running ? html`<${Badge} kind="warn">running<//>` : null}
      <code>${view.model}</code> · ${view.turn_count} turns · ${view.last_seq} events
      ${Object.entries(view.metadata).map(([k, v]) => html` <${Badge}>${k}=${v}<//>`)}
    </p>
    <${ErrorNote} error=${error} />
    <div class="session-layout">
      <div>
        <div class="panel">
          <h3>Timeline</h3>
          <${Timeline} sessionId=${id} events=${events} streaming=${streaming} highlight=${seq} />
          <${Composer} id=${id} view=${view} onError=${setError} onDone=${refresh} />
        </div>
      </div>
      <div>
        <${NextHistory} view=${view} />
        <${Usage} view=${view} />
        <${Notes} id=${id} view=${view} onError=${setError} onDone=${refresh} />
      </div>
    </div>
  </div>`
}


function Composer({ id, view, onError, onDone }) {
  const [text, setText] = useState('')
  const [results, setResults] = useState({})
  const [busy, setBusy] = useState(false)
  const run = async (body) => {
    setBusy(true)
    onError(null)
    try {
      await api.post(`/v1/sessions/${id}/turns`, body)
    } catch (err) {
      onError(err)
    } finally {
      setBusy(false)
      onDone()
    }
  }
  const send = (ev) => {
    ev.preventDefault()
    const input = text
    setText('')
    void run({ input })
  }
  const answer = (ev) => {
    ev.preventDefault()
    void run({ tool_results: view.pending_tool_calls.map((c) => ({ tool_call_id: c.id, content: results[c.id] || '' })) })
    setResults({})
  }
  const simple = (path) => async () => {
    onError(null)
    try {
      await api.post(`/v1/sessions/${id}/${path}`)
    } catch (err) {
      onError(err)
    } finally {
      onDone()
    }
  }
  const paused = view.pending_tool_calls.length > 0
  return html`<div class="composer">
    ${paused
      ? html`<form onSubmit=${answer} aria-label="Tool results">
          <p class="small">The turn waits for the results of its tool calls:</p>
          ${view.pending_tool_calls.map(
            (c) => html`<div key=${c.id}>
              <label for=${`result-${c.id}`}>Result for ${c.name}</label>
              <pre class="small">${JSON.stringify(c.input)}</pre>
              <textarea id=${`result-${c.id}`} value=${results[c.id] || ''} onInput=${(e) => setResults({ ...results, [c.id]: e.currentTarget.value })} />
            </div>`,
          )}
          <button type="submit" disabled=${busy}>Send results</button>
        </form>`
      : html`<form onSubmit=${send} aria-label="Composer">
          <label for="composer-message">Message</label>
          <textarea
            id="composer-message"
            value=${text}
            onInput=${(e) => setText(e.currentTarget.value)}
            onKeyDown=${(e) => {
              if (e.key === 'Enter' && (e.ctrlKey || e.metaKey) && text.trim()) send(e)
            }}
          />
          <div class="row">
            <button type="submit" disabled=${!text.trim()}>Send</button>
            <button type="button" class="secondary" onClick=${simple('interrupt')}>Interrupt</button>
            <button type="button" class="secondary" onClick=${simple('compact')}>Compact now</button>
          </div>
        </form>`}
  </div>`
}

/** The history the next LLM call will get (after compactions), beside the full log. */
function NextHistory({ view }) {
  return html`<div class="panel">
    <h3>Next model input</h3>
    <p class="small muted">The history the model sees on the next call: ${view.messages.length} messages${
      view.compaction?.compactions ? `, after ${view.compaction.compactions} compaction(s)` : ''
    }. The timeline keeps everything.</p>
    <ol class="history" data-testid="next-history">
      ${view.messages.map((m, i) => html`<li key=${i}><strong>${m.role}</strong><div class="msg small">${textOf(m.content)}</div></li>`)}
    </ol>
  </div>`
}

/** Tokens per turn, as a small bar chart (input light, output dark). */
function Usage({ view }) {
  const turns = view.usage.by_turn
  const max = Math.max(1, ...turns.map((t) => t.input_tokens + t.output_tokens + t.compaction_tokens))
  const w = 300
  const bar = turns.length ? w / turns.length : w
  return html`<div class="panel">
    <h3>Usage</h3>
    <p class="small">${view.usage.input_tokens} input · ${view.usage.output_tokens} output · ${view.usage.compaction_tokens} compaction tokens</p>
    ${turns.length
      ? html`<svg class="chart" viewBox=${`0 0 ${w} 90`} role="img" aria-label="Tokens per turn">
          ${turns.map((t, i) => {
            const hIn = (80 * (t.input_tokens + t.compaction_tokens)) / max
            const hOut = (80 * t.output_tokens) / max
            return html`<g key=${t.turn}>
              <title>Turn ${t.turn}: ${t.input_tokens} in, ${t.output_tokens} out, ${t.compaction_tokens} compaction</title>
              <rect class="in" x=${i * bar + 1} y=${88 - hIn - hOut} width=${Math.max(1, bar - 2)} height=${hIn} />
              <rect class="out" x=${i * bar + 1} y=${88 - hOut} width=${Math.max(1, bar - 2)} height=${hOut} />
            </g>`
          })}
        </svg>`
      : html`<p class="small muted">No turns yet.</p>`}
    ${Object.keys(view.tool_stats).length
      ? html`<p class="small">Tools: ${Object.entries(view.tool_stats).map(([name, s]) => `${name} ${s.calls} calls (${s.failures} failed)`).join(' · ')}</p>`
      : null}
  </div>`
}

function Notes({ id, view, onError, onDone }) {
  const [key, setKey] = useState('')
  const [value, setValue] = useState('')
  const save = async (ev) => {
    ev.preventDefault()
    onError(null)
    try {
      await api.put(`/v1/sessions/${id}/notes/${encodeURIComponent(key)}`, { value })
      setKey('')
      setValue('')
    } catch (err) {
      onError(err)
    } finally {
      onDone()
    }
  }
  const remove = async (k) => {
    onError(null)
    try {
      await api.del(`/v1/sessions/${id}/notes/${encodeURIComponent(k)}`)
    } catch (err) {
      onError(err)
    } finally {
      onDone()
    }
  }
  return html`<div class="panel">
    <h3>Notes</h3>
    <ul>
      ${view.notes.map(
        (n) => html`<li key=${n.key}>
          <code>${n.key}</code>: ${n.value}
          <button class="danger" aria-label=${`Delete note ${n.key}`} onClick=${() => remove(n.key)}>Delete</button>
        </li>`,
      )}
    </ul>
    <form class="row" onSubmit=${save} aria-label="Set a note">
      <div>
        <label for="note-key">Note key</label>
        <input id="note-key" value=${key} onInput=${(e) => setKey(e.currentTarget.value)} required pattern="[A-Za-z0-9_.:-]{1,128}" />
      </div>
      <div class="grow">
        <label for="note-value">Note value</label>
        <input id="note-value" value=${value} onInput=${(e) => setValue(e.currentTarget.value)} style="width:100%" />
      </div>
      <button type="submit">Save note</button>
    </form>
  </div>`
}
