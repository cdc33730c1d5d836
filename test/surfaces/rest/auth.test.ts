import t from 'tap'
import { Api, MODES, startBurrow } from '../../helpers/harness.js'

for (const mode of MODES)
  t.test(`${mode.name}: bearer auth and tenant isolation on every route`, async (t) => {
    const h = await startBurrow({ ...mode.env, BURROW_API_KEYS: 'key-a:tenantA,key-b:tenantB,key-a2:tenantA' })
    t.teardown(() => h.close())
    const a = new Api(h.url, 'key-a')
    const a2 = new Api(h.url, 'key-a2')
    const b = new Api(h.url, 'key-b')
    const anon = new Api(h.url)

    t.test('missing, malformed and unknown keys are UNAUTHORIZED', async (t) => {
      const challenge = 'Bearer realm="burrow"'
      const refused = `${challenge}, error="invalid_token"`
      for (const [api, headers, expected] of [
        [anon, {}, challenge],
        [new Api(h.url, 'nope'), {}, refused],
        [anon, { authorization: 'Basic a2V5LWE6' }, refused],
      ] as const) {
        const r = await api.post('/v1/sessions', {}, { headers })
        t.equal(r.status, 401)
        t.equal(r.body.code, 'UNAUTHORIZED')
        t.equal(r.headers['www-authenticate'], expected, 'a 401 says how to authenticate (RFC 6750)')
      }
      const caps = await anon.get('/v1/capabilities')
      t.equal(caps.status, 200, 'capabilities are public')
      t.equal(caps.body.auth, true)
      t.equal((await anon.get('/healthz')).status, 200)
      const events = await anon.sse('/v1/events')
      t.equal(events.status, 401)
      t.equal(events.problem.code, 'UNAUTHORIZED')
      t.equal(events.headers['www-authenticate'], challenge)
      t.equal((await anon.sse('/v1/events?access_token=nope')).headers['www-authenticate'], refused, 'a refused query token too')
    })

    t.test("another tenant's session is SESSION_NOT_FOUND everywhere; a tenant's keys share its sessions", async (t) => {
      const id = await a.createSession()
      t.equal((await a2.turn(id, { input: 'same tenant, other key' })).status, 200)
      const probes = [
        () => b.turn(id, { input: 'steal' }),
        () => b.post(`/v1/sessions/${id}/interrupt`),
        ...(mode.persistent
          ? [
              () => b.get(`/v1/sessions/${id}`),
              () => b.post(`/v1/sessions/${id}/archive`),
              () => b.delete(`/v1/sessions/${id}`),
              () => b.post(`/v1/sessions/${id}/resume`, { input: 'x' }),
            ]
          : []),
        () => b.sse(`/v1/sessions/${id}/events?after=0`).then((s) => ({ status: s.status, body: s.problem })),
      ]
      for (const probe of probes) {
        const r = await probe()
        t.equal(r.status, 404)
        t.equal(r.body.code, 'SESSION_NOT_FOUND')
      }
      if (mode.persistent) {
        const listed = await b.get('/v1/sessions')
        t.notOk(
          listed.body.items.some((i: any) => i.session_id === id),
          "another tenant's sessions are not listed",
        )
        t.equal((await a.get(`/v1/sessions/${id}`)).status, 200, 'the owner still reads it')
      }
      const unknown = await b.turn('01900000-0000-7000-8000-000000000000', { input: 'x' })
      t.same(
        { ...unknown.body, request_id: '', detail: '' },
        { ...(await b.turn(id, { input: 'x' })).body, request_id: '', detail: '' },
        'indistinguishable from an unknown id',
      )
    })

    t.test('tenant event streams carry only the tenant’s sessions', async (t) => {
      const sa = await a.sse('/v1/events')
      const sb = await b.sse('/v1/events')
      const ida = await a.createSession()
      const idb = await b.createSession()
      await a.turn(ida, { input: 'for a' })
      await b.turn(idb, { input: 'for b' })
      const fa = await sa.until((f) => f.event === 'turn_completed')
      const fb = await sb.until((f) => f.event === 'turn_completed')
      t.ok(
        fa.every((f) => f.data.session_id === ida),
        'A sees only A',
      )
      t.ok(
        fb.every((f) => f.data.session_id === idb),
        'B sees only B',
      )
      sa.close()
      sb.close()
    })

    t.test('SSE routes take ?access_token= (EventSource cannot send headers)', async (t) => {
      const id = await a.createSession()
      const ok = await anon.sse(`/v1/sessions/${id}/events?after=0&access_token=key-a`)
      t.equal(ok.status, 200)
      t.equal((await ok.next())!.event, 'session_created')
      ok.close()
      const wrong = await anon.sse(`/v1/sessions/${id}/events?access_token=key-b`)
      t.equal(wrong.status, 404)
      const bad = await anon.sse(`/v1/sessions/${id}/events?access_token=nope`)
      t.equal(bad.status, 401)
      const notHere = await anon.post(`/v1/sessions/${id}/turns?access_token=key-a`, { input: 'x' })
      t.equal(notHere.status, 401, 'only SSE routes accept a token in the URL')
    })
  })

t.test('without keys the service is single-tenant and says so', async (t) => {
  const h = await startBurrow()
  t.teardown(() => h.close())
  const line = h.logs.find((l) => l.msg?.startsWith('burrow listening'))
  t.match(line.tenancy, /single-tenant/)
  const r = await h.api.post('/v1/sessions', {}, { headers: { authorization: 'Bearer anything' } })
  t.equal(r.status, 201, 'keys are ignored when auth is off')
})
