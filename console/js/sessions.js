// Sessions of the tenant: a page at a time (cursor), filtered by status and metadata; create, archive, delete.
import { useEffect, useState } from 'preact/hooks'
import { api } from './api.js'
import { Badge, dateTime, ErrorNote, html, shortId } from './ui.js'

export function Sessions() {
  const [status, setStatus] = useState('')
  // `key=value key2=value2`, as typed; applied on Enter or when the field loses focus.
  const [metadata, setMetadata] = useState('')
  const [cursors, setCursors] = useState([null])
  const [page, setPage] = useState(null)
  const [error, setError] = useState(null)
  const [reload, setReload] = useState(0)
  const cursor = cursors[cursors.length - 1]
  useEffect(() => {
    const q = new URLSearchParams({ limit: '20' })
    if (status) q.set('status', status)
    if (cursor) q.set('cursor', cursor)
    for (const pair of metadata.split(/\s+/).filter(Boolean)) {
      const at = pair.indexOf('=')
      q.append(`metadata.${at < 0 ? pair : pair.slice(0, at)}`, at < 0 ? '' : pair.slice(at + 1))
    }
    api.get(`/v1/sessions?${q}`).then(
      (p) => {
        setPage(p)
        setError(null)
      },
      (err) => setError(err),
    )
  }, [status, metadata, cursor, reload])

  const act = async (fn) => {
    setError(null)
    try {
      await fn()
      setReload((n) => n + 1)
    } catch (err) {
      setError(err)
    }
  }
  return html`<section aria-labelledby="sessions-h">
    <h2 id="sessions-h">Sessions</h2>
    <${NewSession} onError=${setError} />
    <div class="panel">
      <div class="row">
        <div>
          <label for="status-filter">Status</label>
          <select
            id="status-filter"
            value=${status}
            onChange=${(e) => {
              setStatus(e.currentTarget.value)
              setCursors([null])
            }}
          >
            <option value="">all</option>
            <option value="active">active</option>
            <option value="archived">archived</option>
          </select>
        </div>
        <div>
          <label for="metadata-filter">Metadata</label>
          <input
            id="metadata-filter"
            placeholder="key=value"
            defaultValue=${metadata}
            onChange=${(e) => {
              setMetadata(e.currentTarget.value.trim())
              setCursors([null])
            }}
          />
        </div>
        <button class="secondary" onClick=${() => setReload((n) => n + 1)}>Refresh</button>
      </div>
      <${ErrorNote} error=${error} />
      ${page &&
      html`<div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th>Session</th>
              <th>Status</th>
              <th class="opt">Model</th>
              <th>Turns</th>
              <th class="opt">Updated</th>
              <th><span class="sr">Actions</span></th>
            </tr>
          </thead>
          <tbody>
            ${page.items.map(
              (s) => html`<tr key=${s.session_id} data-session=${s.session_id}>
                <td>
                  <a href=${`#/sessions/${s.session_id}`} class="mono">${shortId(s.session_id)}</a>
                  ${Object.entries(s.metadata).map(([k, v]) => html` <${Badge}>${k}=${v}<//>`)}
                </td>
                <td><${Badge} kind=${s.status === 'archived' ? 'warn' : 'ok'}>${s.status}<//></td>
                <td class="opt mono">${s.model}</td>
                <td>${s.turn_count}</td>
                <td class="opt small">${dateTime(s.updated_at)}</td>
                <td class="row">
                  ${s.status === 'active'
                    ? html`<button class="secondary" aria-label=${`Archive ${s.session_id}`} onClick=${() => act(() => api.post(`/v1/sessions/${s.session_id}/archive`))}>
                        Archive
                      </button>`
                    : null}
                  <button
                    class="danger"
                    aria-label=${`Delete ${s.session_id}`}
                    onClick=${() => confirm('Delete this session, its events and its memories?') && act(() => api.del(`/v1/sessions/${s.session_id}`))}
                  >
                    Delete
                  </button>
                </td>
              </tr>`,
            )}
          </tbody>
        </table>
      </div>
      ${page.items.length === 0 ? html`<p class="muted">No sessions.</p>` : null}
      <div class="row">
        <button class="secondary" disabled=${cursors.length === 1} onClick=${() => setCursors((c) => c.slice(0, -1))}>Previous page</button>
        <button class="secondary" disabled=${!page.next_cursor} onClick=${() => setCursors((c) => [...c, page.next_cursor])}>Next page</button>
      </div>`}
    </div>
  </section>`
}

function NewSession({ onError }) {
  const [model, setModel] = useState(api.caps.default_model || '')
  const [system, setSystem] = useState('')
  const [busy, setBusy] = useState(false)
  const create = async (ev) => {
    ev.preventDefault()
    setBusy(true)
    try {
      const body = { model }
      if (system.trim()) body.system_prompt = system
      const s = await api.post('/v1/sessions', body)
      location.hash = `#/sessions/${s.session_id}`
    } catch (err) {
      onError(err)
    } finally {
      setBusy(false)
    }
  }
  return html`<form class="panel" onSubmit=${create} aria-label="New session">
    <div class="row">
      <div class="grow">
        <label for="new-model">Model</label>
        <input id="new-model" value=${model} onInput=${(e) => setModel(e.currentTarget.value)} style="width:100%" />
      </div>
      <div class="grow">
        <label for="new-system">System prompt</label>
        <input id="new-system" value=${system} onInput=${(e) => setSystem(e.currentTarget.value)} style="width:100%" />
      </div>
      <button type="submit" disabled=${busy}>New session</button>
    </div>
  </form>`
}
