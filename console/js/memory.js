// Memory search with scores and provenance: a hit from a compaction links to the exact event
// (session, turn, seq) in that session's timeline.
import { useEffect, useState } from 'preact/hooks'
import { api } from './api.js'
import { Badge, ErrorNote, html, shortId } from './ui.js'

export function Memory({ initial }) {
  const [q, setQ] = useState(initial || '')
  const [hits, setHits] = useState(null)
  const [error, setError] = useState(null)
  const search = async (text) => {
    setError(null)
    try {
      const r = await api.get(`/v1/memory/search?${new URLSearchParams({ q: text, limit: '20' })}`)
      setHits(r.results)
    } catch (err) {
      setError(err)
      setHits(null)
    }
  }
  useEffect(() => {
    if (initial) void search(initial)
  }, [initial])
  return html`<section aria-labelledby="memory-h">
    <h2 id="memory-h">Memory</h2>
    <form
      class="panel row"
      role="search"
      onSubmit=${(e) => {
        e.preventDefault()
        history.replaceState(null, '', `#/memory?q=${encodeURIComponent(q)}`)
        void search(q)
      }}
    >
      <div class="grow">
        <label for="memory-q">Search memory</label>
        <input id="memory-q" type="search" value=${q} onInput=${(e) => setQ(e.currentTarget.value)} required style="width:100%" />
      </div>
      <button type="submit">Search</button>
    </form>
    <${ErrorNote} error=${error} />
    ${hits &&
    html`<div class="panel" aria-label="Results">
      ${hits.length === 0 ? html`<p class="muted">No hits.</p>` : null}
      ${hits.map(
        (h) => html`<div class="hit" key=${h.id} data-testid="hit">
          <div class="small">
            <${Badge}>score ${h.score.toFixed(3)}<//>
            ${h.session_id
              ? html` from <a href=${`#/sessions/${h.session_id}?seq=${h.seq}`} data-testid="provenance"
                    >session ${shortId(h.session_id)}, turn ${h.turn}, event #${h.seq}</a
                  >`
              : html` <span class="muted">added directly</span>`}
            ${Object.entries(h.metadata || {}).map(([k, v]) => html` <${Badge}>${k}=${v}<//>`)}
          </div>
          <div class="msg">${h.content}</div>
        </div>`,
      )}
    </div>`}
  </section>`
}
