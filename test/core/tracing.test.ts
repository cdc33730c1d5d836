import t from 'tap'
import { formatTraceparent, injectTrace, NO_TRACING, NOOP_SPAN, parseTraceparent } from '../../src/core/tracing.js'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const SPAN = '00f067aa0ba902b7'

t.test('parseTraceparent reads the W3C header and refuses what the recommendation refuses', async (t) => {
  t.same(parseTraceparent(`00-${TRACE}-${SPAN}-01`), { traceId: TRACE, spanId: SPAN, flags: 1 })
  t.same(parseTraceparent(`00-${TRACE}-${SPAN}-00`, 'congo=t61rcWkgMzE'), {
    traceId: TRACE,
    spanId: SPAN,
    flags: 0,
    state: 'congo=t61rcWkgMzE',
  })
  t.same(
    parseTraceparent(`01-${TRACE}-${SPAN}-01-later-fields`),
    { traceId: TRACE, spanId: SPAN, flags: 1 },
    'a later version by its first fields',
  )
  for (const bad of [
    undefined,
    ['x'],
    '',
    `ff-${TRACE}-${SPAN}-01`,
    `00-${'0'.repeat(32)}-${SPAN}-01`,
    `00-${TRACE}-${'0'.repeat(16)}-01`,
    `00-${TRACE.toUpperCase()}-${SPAN}-01`,
    `00-${TRACE}-${SPAN}-01-extra`,
    `00-${TRACE.slice(1)}-${SPAN}-01`,
  ])
    t.equal(parseTraceparent(bad), undefined, String(bad))
})

t.test('formatTraceparent and injectTrace write the header back', async (t) => {
  const ctx = { traceId: TRACE, spanId: SPAN, flags: 1, state: 'a=b' }
  t.equal(formatTraceparent(ctx), `00-${TRACE}-${SPAN}-01`)
  const headers: Record<string, string> = { accept: 'x' }
  injectTrace(ctx, headers)
  t.same(headers, { accept: 'x', traceparent: `00-${TRACE}-${SPAN}-01`, tracestate: 'a=b' })
  const none: Record<string, string> = {}
  injectTrace(undefined, none)
  t.same(none, {}, 'no context, no header')
})

t.test('tracing off: one shared no-op span, nothing allocated per call', async (t) => {
  t.equal(NO_TRACING.enabled, false)
  const span = NO_TRACING.start('x', undefined)
  t.equal(span, NOOP_SPAN)
  t.equal(NO_TRACING.start('y', { traceId: TRACE, spanId: SPAN, flags: 1 }, 'server'), NOOP_SPAN)
  t.equal(span.context, undefined)
  span.set('a', 1)
  span.fail('X')
  span.end()
})
