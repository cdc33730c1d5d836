// Live activity of the tenant: every session's events as they happen (GET /v1/events). The
// stream resumes where it left off after a disconnect or a server restart: EventSource sends
// Last-Event-ID when it reconnects by itself, and a stream opened again says `after=`.
import { useEffect, useState } from 'preact/hooks'
import { api } from './api.js'
import { STORED_TYPES } from './event-types.js'
import { html, shortId, summary, time } from './ui.js'

const KEEP = 300

export function Activity() {
  const [events, setEvents] = useState([])
  const [state, setState] = useState('connecting')
  const [note, setNote] = useState(null)
  useEffect(() => {
    let source = null
    let closed = false
    let retry = null
    let lastId = null
    const seen = new Set()
    const open = () => {
      source = new EventSource(api.streamUrl(lastId ? `/v1/events?after=${lastId}` : '/v1/events'))
      source.onopen = () => setState('live')
      source.onerror = () => {
        if (closed) return
        setState('reconnecting')
        // EventSource retries by itself; a closed one (the token expired, the server refused) is opened again with the current token.
        if (source.readyState === EventSource.CLOSED) retry = setTimeout(open, 1000)
      }
      // Text deltas are left out of the feed: the session's page streams them.
      for (const type of STORED_TYPES)
        source.addEventListener(type, (m) => {
          if (m.lastEventId) lastId = m.lastEventId
          const e = JSON.parse(m.data)
          const key = `${e.session_id}:${e.seq}`
          if (seen.has(key)) return
          // Belt and braces against a replay overlapping what was shown (the server sends none); kept small.
          if (seen.size > KEEP * 20) seen.clear()
          seen.add(key)
          setEvents((list) => [{ ...e, key }, ...list].slice(0, KEEP))
        })
      source.addEventListener('stream_truncated', (m) => setNote(JSON.parse(m.data)))
    }
    open()
    return () => {
      closed = true
      clearTimeout(retry)
      source?.close()
    }
  }, [])
  return html`<section aria-labelledby="activity-h">
    <h2 id="activity-h">Live activity</h2>
    <p class="small muted" aria-live="polite">
      Stream: <span data-testid="stream-state">${state}</span> · every session of the tenant, newest first (the last ${KEEP}).
    </p>
    ${note
      ? html`<p class="small muted" role="status">
          Some events could not be replayed after a reconnection (${note.data?.reason}); the feed goes on live.
        </p>`
      : null}
    <div class="panel">
      ${events.length === 0 ? html`<p class="muted">Nothing yet: run a turn in any session.</p>` : null}
      <ul class="feed" aria-label="Events">
        ${events.map(
          (e) =>
            html`<li key=${e.key} data-type=${e.type} data-session=${e.session_id}>
              <span class="small muted">${time(e.at)}</span>
              <span class="what"
                ><a href=${`#/sessions/${e.session_id}?seq=${e.seq}`}>${shortId(e.session_id)}</a> <strong>${e.type}</strong>
                <span class="muted">${summary(e)}</span></span
              >
            </li>`,
        )}
      </ul>
    </div>
  </section>`
}

