// The one HTTP retry policy (src/core/http-retry.ts): Retry-After in both forms, backoff,
// what is retried, and the loop against a real loopback server — giving up after the limit
// or the deadline, and stopping at once when the signal fires, mid-wait included.
import { getEventListeners } from 'node:events'
import t, { type Test } from 'tap'
import { Agent, errors as undiciErrors, request, type Dispatcher } from 'undici'
import { BurrowError } from '../../src/core/errors.js'
import {
  backoffMs,
  httpRetry,
  isRetryableError,
  isRetryableStatus,
  retryAfterMs,
  sleepUnlessAborted,
  type RetryPolicy,
} from '../../src/core/http-retry.js'
import { caught } from '../helpers/errors.js'
import { closedPort, gaps, scriptedServer, type Reply } from '../helpers/servers.js'

// ---- the parts -----------------------------------------------------------------------------------

t.test('Retry-After as delay-seconds', async (t) => {
  t.equal(retryAfterMs('0'), 0)
  t.equal(retryAfterMs('3'), 3000)
  t.equal(retryAfterMs('0.25'), 250, 'fractions are accepted')
  t.equal(retryAfterMs(' 2 '), 2000, 'surrounding spaces are ignored')
  t.equal(retryAfterMs('-5'), 0, 'a negative delay means now')
  t.equal(retryAfterMs(['7', '1']), 7000, 'the first of repeated headers')
})

t.test('Retry-After as an HTTP-date', async (t) => {
  const now = Date.parse('Wed, 21 Oct 2015 07:28:00 GMT')
  t.equal(retryAfterMs('Wed, 21 Oct 2015 07:28:30 GMT', now), 30_000)
  t.equal(retryAfterMs('Wed, 21 Oct 2015 07:27:00 GMT', now), 0, 'a date in the past means now')
  const soon = new Date(Date.now() + 60_000).toUTCString()
  const ms = retryAfterMs(soon)!
  t.ok(ms > 58_000 && ms <= 60_000, `against the clock by default (${ms} ms)`)
})

t.test('a missing or unreadable Retry-After is ignored', async (t) => {
  for (const v of [undefined, '', '   ', 'soon', 'NaN', [] as string[]]) t.equal(retryAfterMs(v), undefined, JSON.stringify(v))
})

t.test('backoff: full jitter over an exponential, capped; Retry-After plus a quarter of the jitter', async (t) => {
  const p: RetryPolicy = { maxRetries: 5, baseMs: 100, maxMs: 1000 }
  t.same(
    [0, 1, 2, 3, 4].map((n) => backoffMs(p, n, undefined, 1)),
    [100, 200, 400, 800, 1000],
    'the ceiling doubles up to maxMs',
  )
  t.equal(backoffMs(p, 2, undefined, 0.5), 200, 'the draw scales it')
  t.equal(backoffMs(p, 3, undefined, 0), 0)
  t.equal(backoffMs(p, 0, 300, 0), 300, 'Retry-After exactly, with a zero draw')
  t.equal(backoffMs(p, 1, 300, 1), 350, 'plus a quarter of the jitter ceiling')
  t.equal(backoffMs(p, 0, 60_000, 0), 1000, 'a long Retry-After is capped at maxMs')
  const draws = Array.from({ length: 200 }, () => backoffMs(p, 2, undefined))
  t.ok(
    draws.every((d) => d >= 0 && d < 400),
    'Math.random by default, within [0, ceiling)',
  )
  t.ok(new Set(draws).size > 100, 'and actually random')
})

t.test('which statuses and errors are retried', async (t) => {
  for (const s of [408, 429, 500, 502, 503, 504, 529]) t.ok(isRetryableStatus(s), `${s} is retried`)
  for (const s of [200, 301, 400, 401, 403, 404, 409, 413, 422, 501]) t.notOk(isRetryableStatus(s), `${s} is not`)
  const coded = (code: string) => Object.assign(new Error(code), { code })
  for (const c of ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN', 'UND_ERR_SOCKET']) {
    t.ok(isRetryableError(coded(c)), `${c} is retried`)
    t.ok(isRetryableError(new TypeError('fetch failed', { cause: coded(c) })), `${c} as the cause is retried`)
  }
  t.notOk(isRetryableError(new undiciErrors.HeadersTimeoutError()), 'a headers timeout is not: it spent its allowance')
  t.notOk(isRetryableError(new undiciErrors.BodyTimeoutError()), 'nor a body timeout')
  t.notOk(isRetryableError(new undiciErrors.ConnectTimeoutError()), 'nor a connect timeout')
  t.notOk(isRetryableError(new BurrowError('PROVIDER_TIMEOUT', 'x')), 'an error already mapped to a Burrow code is final')
  t.notOk(isRetryableError(coded('ENOTFOUND')))
  for (const v of [undefined, null, 'ECONNRESET', { code: 42 }]) t.notOk(isRetryableError(v), String(v))
})

t.test('the wait rejects with exactly the reason when aborted, and leaves no listener', async (t) => {
  const ac = new AbortController()
  const reason = { why: 'stop' }
  const started = performance.now()
  setTimeout(() => ac.abort(reason), 30)
  t.equal(await caught(sleepUnlessAborted(10_000, ac.signal)), reason)
  t.ok(performance.now() - started < 500, 'at once, not after the wait')
  t.equal(await caught(sleepUnlessAborted(10_000, AbortSignal.abort(reason))), reason, 'an aborted signal: no wait at all')
  const kept = new AbortController()
  await sleepUnlessAborted(5, kept.signal)
  t.equal(getEventListeners(kept.signal, 'abort').length, 0, 'a finished wait removes its listener')
})

// ---- the loop, against a loopback server -----------------------------------------------------------

interface Run {
  attempts: number[]
  discarded: number[]
  result: Promise<unknown>
}

/** httpRetry POSTing to `url` with undici; `failed` / `refused` wrap what they get so the test can see it. */
function run(t: Test, url: string, policy: Partial<RetryPolicy> = {}, signal?: AbortSignal): Run {
  const agent = new Agent()
  t.teardown(() => agent.close())
  const attempts: number[] = []
  const discarded: number[] = []
  const result = httpRetry<Dispatcher.ResponseData>({
    policy: { maxRetries: 2, baseMs: 0, maxMs: 5000, ...policy },
    signal,
    send: (n) => {
      attempts.push(n)
      return request(url, { method: 'POST', body: '{}', dispatcher: agent, signal })
    },
    failed: (err) => ({ failed: err }),
    refused: async (res) => ({ refused: res.statusCode, body: await res.body.text() }),
    discard: async (res) => {
      discarded.push(res.statusCode)
      await res.body.dump()
    },
  }).then(async (res) => ({ ok: res.statusCode, body: await res.body.text() }))
  return { attempts, discarded, result }
}

const answers = (...rs: Reply[]) => rs

t.test('a retryable status, then success: the 2xx answer comes back with its body unread', async (t) => {
  const s = await scriptedServer(t, answers({ status: 503, body: 'busy' }, { status: 429 }, { status: 200, body: 'done' }))
  const r = run(t, s.url)
  t.same(await r.result, { ok: 200, body: 'done' })
  t.same(r.attempts, [0, 1, 2])
  t.same(r.discarded, [503, 429], 'each retried answer is released before the wait')
})

t.test('Retry-After in seconds is waited for', async (t) => {
  const s = await scriptedServer(t, answers({ status: 429, headers: { 'retry-after': '0.3' } }))
  const r = run(t, s.url)
  t.same(await r.result, { ok: 200, body: '{}' })
  const [gap] = gaps(s.seen)
  t.ok(gap! >= 295, `waited ${Math.round(gap!)} ms for Retry-After: 0.3`)
  t.ok(gap! < 2000, 'and not much longer')
})

t.test('Retry-After as an HTTP-date is waited for', async (t) => {
  // HTTP-dates have whole seconds: two seconds ahead is between one and two seconds away.
  const at = new Date(Date.now() + 2000).toUTCString()
  const s = await scriptedServer(t, answers({ status: 503, headers: { 'retry-after': at } }))
  const r = run(t, s.url)
  t.same(await r.result, { ok: 200, body: '{}' })
  const [gap] = gaps(s.seen)
  t.ok(gap! >= 950, `waited ${Math.round(gap!)} ms for ${at}`)
  t.ok(gap! < 3500)
})

t.test('gives up after maxRetries with the last answer', async (t) => {
  for (const maxRetries of [0, 1, 3]) {
    const s = await scriptedServer(
      t,
      Array.from({ length: 6 }, (_, i) => ({ status: 500, body: `failure ${i}` })),
    )
    const r = run(t, s.url, { maxRetries })
    t.same(
      await r.result.catch((e: unknown) => e),
      { refused: 500, body: `failure ${maxRetries}` },
      `maxRetries ${maxRetries}: refused with the last answer`,
    )
    t.equal(s.seen.length, maxRetries + 1)
    t.equal(r.discarded.length, maxRetries, 'the last answer is not discarded: refused reads it')
  }
})

t.test('a status that is not retryable is refused at once', async (t) => {
  for (const status of [400, 401, 404, 422]) {
    const s = await scriptedServer(t, answers({ status, body: 'no' }))
    const r = run(t, s.url)
    t.same(await r.result.catch((e: unknown) => e), { refused: status, body: 'no' })
    t.equal(s.seen.length, 1, `${status}: one attempt`)
  }
})

t.test('connection refused is retried, then leaves through failed() with the transport error', async (t) => {
  const port = await closedPort()
  const r = run(t, `http://127.0.0.1:${port}/`, { maxRetries: 2 })
  const out = (await r.result.catch((e: unknown) => e)) as { failed: { code?: string } }
  t.equal(out.failed?.code, 'ECONNREFUSED')
  t.same(r.attempts, [0, 1, 2])
})

t.test('the deadline stops retrying before a wait that would end past it', async (t) => {
  const s = await scriptedServer(t, answers({ status: 429, headers: { 'retry-after': '1' }, body: 'later' }))
  const started = performance.now()
  const r = run(t, s.url, { maxRetries: 5, deadlineMs: 500 })
  t.same(await r.result.catch((e: unknown) => e), { refused: 429, body: 'later' })
  t.equal(s.seen.length, 1, 'a 1 s wait does not fit in 500 ms')
  t.ok(performance.now() - started < 900, 'gave up at once rather than waiting')

  // Waits of 500 ms against a 1,450 ms deadline: the first two fit with room for a loaded machine's
  // overhead (225 ms a step); the third would end at 1,500 ms or later, past it, whatever the load.
  const wait = { status: 503, headers: { 'retry-after': '0.5' } }
  const s2 = await scriptedServer(t, answers(wait, wait, wait, wait, wait))
  const r2 = run(t, s2.url, { maxRetries: 5, deadlineMs: 1450 })
  t.match(await r2.result.catch((e: unknown) => e), { refused: 503 })
  t.equal(s2.seen.length, 3, 'waits ending at ~500 and ~1,000 ms fit; one ending at ~1,500 ms does not')
})

t.test('abort during the wait rejects with exactly the reason, at once, and sends nothing more', async (t) => {
  const s = await scriptedServer(t, answers({ status: 503, headers: { 'retry-after': '10' } }))
  const ac = new AbortController()
  const reason = new Error('interrupted during the wait')
  const r = run(t, s.url, {}, ac.signal)
  while (r.discarded.length === 0) await new Promise((resolve) => setTimeout(resolve, 5))
  const abortedAt = performance.now()
  ac.abort(reason)
  t.equal(await r.result.catch((e: unknown) => e), reason)
  t.ok(performance.now() - abortedAt < 200, 'did not sit out the 10 s')
  t.equal(s.seen.length, 1)
  t.equal(getEventListeners(ac.signal, 'abort').length, 0, 'no listener left on the signal')
})

t.test('abort while the server has not answered rejects with exactly the reason', async (t) => {
  const s = await scriptedServer(t, answers({ hang: 'headers' }))
  const ac = new AbortController()
  const reason = { stop: true }
  const r = run(t, s.url, {}, ac.signal)
  while (s.seen.length === 0) await new Promise((resolve) => setTimeout(resolve, 5))
  ac.abort(reason)
  t.equal(await r.result.catch((e: unknown) => e), reason, 'the reason, not failed(err)')
  t.same(r.attempts, [0])
})

t.test('an already-aborted signal sends nothing', async (t) => {
  const s = await scriptedServer(t, [])
  const reason = new Error('gone before it started')
  const r = run(t, s.url, {}, AbortSignal.abort(reason))
  t.equal(await r.result.catch((e: unknown) => e), reason)
  t.same(r.attempts, [])
  t.equal(s.seen.length, 0)
})
