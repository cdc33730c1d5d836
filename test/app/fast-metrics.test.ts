import t from 'tap'
import { Registry } from 'prom-client'
import { FastCounter, FastHistogram } from '../../src/app/fast-metrics.js'

t.test('fast counter and histogram expose standard Prometheus series', async (t) => {
  const r = new Registry()
  const c = new FastCounter('x_total', 'Things.', ['kind']).register(r)
  const h = new FastHistogram('x_seconds', 'Latency.', ['kind'], [0.1, 1]).register(r)
  c.inc(['a'])
  c.inc(['a'], 2)
  c.inc(['b'])
  for (const v of [0.05, 0.1, 0.5, 3]) h.observe(['a'], v)
  const text = await r.metrics()
  const lines = text.split('\n').filter((l) => l && !l.startsWith('#'))
  t.same(lines, [
    'x_total{kind="a"} 3',
    'x_total{kind="b"} 1',
    'x_seconds_bucket{kind="a",le="0.1"} 2', // 0.05 and 0.1 (le is inclusive)
    'x_seconds_bucket{kind="a",le="1"} 3',
    'x_seconds_bucket{kind="a",le="+Inf"} 4',
    'x_seconds_sum{kind="a"} 3.65',
    'x_seconds_count{kind="a"} 4',
  ])
  t.match(text, /# TYPE x_total counter/)
  t.match(text, /# TYPE x_seconds histogram/)
})
