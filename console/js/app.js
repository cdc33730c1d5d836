// The console's shell: the login (an API key exchanged for a short-lived token), the navigation
// and hash routes (#/activity, #/sessions, #/sessions/<id>?seq=<n>, #/memory).
import { render } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { api } from './api.js'
import { Activity } from './activity.js'
import { Memory } from './memory.js'
import { SessionPage } from './session.js'
import { Sessions } from './sessions.js'
import { ErrorNote, html } from './ui.js'

function parseRoute() {
  const hash = location.hash.replace(/^#/, '') || '/activity'
  const [path, query = ''] = hash.split('?')
  const params = new URLSearchParams(query)
  const parts = path.split('/').filter(Boolean)
  if (parts[0] === 'sessions' && parts[1]) return { view: 'session', id: parts[1], seq: Number(params.get('seq')) || null }
  if (parts[0] === 'sessions') return { view: 'sessions' }
  if (parts[0] === 'memory') return { view: 'memory', q: params.get('q') || '' }
  return { view: 'activity' }
}

function Login({ onDone }) {
  const [key, setKey] = useState('')
  const [readOnly, setReadOnly] = useState(false)
  const [error, setError] = useState(null)
  const [busy, setBusy] = useState(false)
  const submit = async (ev) => {
    ev.preventDefault()
    setBusy(true)
    setError(null)
    try {
      await api.login(key, readOnly ? 'read' : 'write')
      setKey('')
      onDone()
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  return html`<main>
    <form class="panel login" onSubmit=${submit}>
      <h2>Sign in to Burrow</h2>
      <p class="muted small">
        The key is exchanged for a short-lived token and then forgotten; the console keeps only the token, in this tab.
      </p>
      <label for="api-key">API key</label>
      <input id="api-key" type="password" autocomplete="off" value=${key} onInput=${(e) => setKey(e.currentTarget.value)} required />
      <label class="small"
        ><input type="checkbox" checked=${readOnly} onChange=${(e) => setReadOnly(e.currentTarget.checked)} /> Read-only</label
      >
      <${ErrorNote} error=${error} />
      <p><button type="submit" disabled=${busy || !key}>Sign in</button></p>
    </form>
  </main>`
}

function App() {
  const [route, setRoute] = useState(parseRoute())
  const [ready, setReady] = useState(false)
  const [error, setError] = useState(null)
  const [, setTick] = useState(0)
  useEffect(() => {
    const onHash = () => setRoute(parseRoute())
    addEventListener('hashchange', onHash)
    const off = api.onChange(() => setTick((n) => n + 1))
    api.init().then(
      () => setReady(true),
      (err) => setError(err),
    )
    return () => {
      removeEventListener('hashchange', onHash)
      off()
    }
  }, [])
  if (error) return html`<main><${ErrorNote} error=${error} /></main>`
  if (!ready) return html`<p class="boot">Connecting…</p>`
  if (api.needsLogin) return html`<${Login} onDone=${() => setTick((n) => n + 1)} />`
  const link = (view, href, label) =>
    html`<a href=${href} aria-current=${route.view === view || (view === 'sessions' && route.view === 'session') ? 'page' : undefined}>${label}</a>`
  const who = api.caps.auth
    ? html`<span class="who"
        >${api.readOnly ? 'read-only token' : 'read-write token'}
        <button class="secondary" onClick=${() => api.logout()}>Sign out</button></span
      >`
    : html`<span class="who">single-tenant (no keys)</span>`
  let view
  if (route.view === 'sessions') view = html`<${Sessions} />`
  else if (route.view === 'session') view = html`<${SessionPage} key=${route.id} id=${route.id} seq=${route.seq} />`
  else if (route.view === 'memory') view = html`<${Memory} initial=${route.q} />`
  else view = html`<${Activity} />`
  return html`<div>
    <header class="top">
      <h1>Burrow</h1>
      <nav aria-label="Views">
        ${link('activity', '#/activity', 'Activity')} ${link('sessions', '#/sessions', 'Sessions')} ${link('memory', '#/memory', 'Memory')}
      </nav>
      ${who}
    </header>
    <main>${view}</main>
  </div>`
}

render(html`<${App} />`, document.getElementById('root'))
