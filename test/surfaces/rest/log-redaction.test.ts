// Credentials never reach the logs: URLs are logged with `?access_token=` (and other
// credential-like parameters) redacted, bearer keys not at all — on successful, failing,
// streaming and malformed requests alike. Every captured log line is searched whole.
import t from 'tap'
import { redactUrl } from '../../../src/app/logger.js'
import { startBurrow } from '../../helpers/harness.js'
import { head, rawRequest } from '../../helpers/raw-http.js'

const KEY = 'sk-burrow-7Qz9XkLmWvP3'
const OTHER = 'pw-0Ta8LnRt2'

t.test('redactUrl', async (t) => {
  t.equal(redactUrl('/v1/events'), '/v1/events')
  t.equal(redactUrl('/v1/events?after=3&access_token=abc'), '/v1/events?after=3&access_token=[redacted]')
  t.equal(
    redactUrl('/x?access%5Ftoken=abc&API_KEY=d&password=e&q=keep'),
    '/x?access%5Ftoken=[redacted]&API_KEY=[redacted]&password=[redacted]&q=keep',
  )
  t.equal(
    redactUrl('/x?access_token&token=%ZZ'),
    '/x?access_token&token=[redacted]',
    'no value; a value that is not valid percent-encoding',
  )
  t.equal(redactUrl('/x?%E0%A4%A=1'), '/x?%E0%A4%A=1', 'a name that is not valid percent-encoding is compared as sent')
})

t.test('no log line holds a key or an access token', async (t) => {
  const h = await startBurrow({ BURROW_API_KEYS: `${KEY}:acme`, BURROW_SESSION_STORE: 'lmdb', BURROW_DURABILITY: 'relaxed' })
  t.teardown(() => h.close())
  const id = await h.api.createSession({}, { token: KEY })
  const anon = { token: null }

  // An SSE stream authenticated by the query token, read, then closed.
  const stream = await h.api.sse(`/v1/sessions/${id}/events?after=0&access_token=${KEY}`, anon)
  t.equal(stream.status, 200)
  t.equal((await stream.next())!.event, 'session_created')
  stream.close()
  const tenant = await h.api.sse(`/v1/events?access_token=${KEY}`, anon)
  t.equal(tenant.status, 200)
  tenant.close()
  // Failing requests with the token in the URL: 404, 401 (not an SSE route), 400 (validation).
  t.equal((await h.api.sse(`/v1/sessions/01900000-0000-7000-8000-000000000000/events?access_token=${KEY}`, anon)).status, 404)
  t.equal((await h.api.post(`/v1/sessions?access_token=${KEY}`, {}, anon)).status, 401)
  t.equal((await h.api.sse(`/v1/events?after=x&access_token=${KEY}&password=${OTHER}`, anon)).status, 400)
  // Failing requests with the bearer key.
  t.equal((await h.api.post('/v1/sessions', { bogus: 1 }, { token: KEY })).status, 400)
  t.equal((await h.api.get(`/v1/sessions/${id}/notes/missing`, { token: KEY })).status, 404)
  // What the router and the HTTP parser refuse, with the token in the URL.
  for (const path of [
    `/v1/sessions/%E0%A4%A?access_token=${KEY}`,
    `/v1/sessions/${'a'.repeat(500)}?access_token=${KEY}`,
    `/rpc?access_token=${KEY}`,
    `/mcp?access_token=${KEY}`,
  ]) {
    const r = await rawRequest(
      h.url,
      head('POST', path, { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'content-length': '2' }) + '{}',
    )
    t.ok(r.status >= 200 && r.status < 500, `${path.slice(0, 30)}: ${r.status}`)
  }
  const malformed = await rawRequest(
    h.url,
    head('GET', `/v1/events?access_token=${KEY}`, { authorization: `Bearer ${KEY}`, 'x-bad': 'a\x01b' }),
  )
  t.equal(malformed.status, 400)

  const leaks = h.logs.filter((l) => {
    const s = JSON.stringify(l)
    return s.includes(KEY) || s.includes(OTHER)
  })
  t.same(leaks, [], 'no log line holds a credential')
  const urls = h.logs.filter((l) => l.msg === 'incoming request').map((l) => l.req.url as string)
  t.ok(urls.filter((u) => u.includes('access_token=[redacted]')).length >= 9, 'requests are logged, their tokens redacted')
  t.ok(urls.some((u) => u.includes(`password=[redacted]`)))
})
