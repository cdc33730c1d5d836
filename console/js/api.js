// The console's only way to the service: Burrow's public REST + SSE API, exactly as any other
// client uses it. With keys configured, the API key is exchanged once for a short-lived token
// (POST /v1/tokens); only the token is kept (in this tab's sessionStorage) and it is refreshed
// before it expires. EventSource cannot send headers: streams take the token as ?access_token=.

const STORE = 'burrow.console.token'

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `HTTP ${status}`)
    this.status = status
    this.code = problem?.code || 'INTERNAL'
    this.problem = problem
  }
}

export class Api {
  constructor() {
    this.caps = null
    this.token = null
    this.timer = null
    this.listeners = new Set()
    try {
      const saved = JSON.parse(sessionStorage.getItem(STORE) || 'null')
      if (saved && saved.expiresAt > Date.now() + 5000) this.token = saved
    } catch {
      this.token = null
    }
  }

  /** Told when the login state changes (a token minted, refreshed for the last time, or dropped). */
  onChange(fn) {
    this.listeners.add(fn)
    return () => this.listeners.delete(fn)
  }

  async init() {
    this.caps = await this.request('GET', '/v1/capabilities', undefined, { anonymous: true })
    if (this.token) this.schedule()
    return this.caps
  }

  /** Whether the service wants a credential and the console has none. */
  get needsLogin() {
    return Boolean(this.caps?.auth) && !this.token
  }

  get readOnly() {
    return this.token?.scope === 'read'
  }

  async login(key, scope) {
    const t = await this.request('POST', '/v1/tokens', { scope }, { credential: key })
    this.keep(t)
  }

  logout() {
    this.token = null
    clearTimeout(this.timer)
    sessionStorage.removeItem(STORE)
    this.emit()
  }

  keep(t) {
    this.token = { token: t.token, scope: t.scope, expiresAt: Date.parse(t.expires_at), refreshUntil: Date.parse(t.refresh_until) }
    sessionStorage.setItem(STORE, JSON.stringify(this.token))
    this.schedule()
    this.emit()
  }

  /** Refreshes the token at four fifths of its life; past its refresh limit, asks for the key again. */
  schedule() {
    clearTimeout(this.timer)
    const left = this.token.expiresAt - Date.now()
    this.timer = setTimeout(() => void this.refresh(), Math.max(1000, left * 0.8))
  }

  async refresh() {
    if (!this.token) return
    try {
      this.keep(await this.request('POST', '/v1/tokens', { scope: this.token.scope }))
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) this.logout()
      else this.timer = setTimeout(() => void this.refresh(), 5000)
    }
  }

  emit() {
    for (const fn of this.listeners) fn()
  }

  async request(method, path, body, opts = {}) {
    const headers = {}
    if (body !== undefined) headers['content-type'] = 'application/json'
    const credential = opts.credential ?? this.token?.token
    if (credential && !opts.anonymous) headers.authorization = `Bearer ${credential}`
    const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
    if (res.status === 204) return null
    const text = await res.text()
    let data = null
    try {
      data = text ? JSON.parse(text) : null
    } catch {
      data = { detail: text }
    }
    if (!res.ok) {
      const err = new ApiError(res.status, data)
      if (res.status === 401 && this.token && !opts.credential) this.logout()
      throw err
    }
    return data
  }

  get(path) {
    return this.request('GET', path)
  }
  post(path, body = {}) {
    return this.request('POST', path, body)
  }
  put(path, body) {
    return this.request('PUT', path, body)
  }
  del(path) {
    return this.request('DELETE', path)
  }

  /** An SSE URL carrying the current token (EventSource sends no headers). */
  streamUrl(path) {
    if (!this.token) return path
    return `${path}${path.includes('?') ? '&' : '?'}access_token=${encodeURIComponent(this.token.token)}`
  }
}

export const api = new Api()
