import type { Metric, Registry } from 'prom-client'

interface Series {
  labels: Record<string, string>
  value: number
}
interface HistogramSeries {
  labels: Record<string, string>
  counts: number[]
  sum: number
  count: number
}
type Sample = { value: number; labels: Record<string, string | number>; metricName?: string }

/**
 * Counter and histogram whose per-observation cost is one map lookup and an array
 * increment. prom-client's own `observe` validates and hashes the label object on every
 * call, which showed up at ~8 % of a turn's CPU; here prom-client keeps the registry and
 * the exposition format, and reads these through the metric interface (`get()`) at scrape.
 */
abstract class FastMetric {
  readonly aggregator = 'sum'
  constructor(
    readonly name: string,
    readonly help: string,
    protected readonly labelNames: readonly string[],
  ) {}

  register(registry: Registry): this {
    registry.registerMetric(this as unknown as Metric)
    return this
  }

  protected labelsOf(values: readonly string[]): Record<string, string> {
    const out: Record<string, string> = {}
    this.labelNames.forEach((n, i) => {
      out[n] = values[i] ?? ''
    })
    return out
  }
}

export class FastCounter extends FastMetric {
  readonly type = 'counter'
  private readonly series = new Map<string, Series>()

  inc(labelValues: readonly string[], by = 1): void {
    const key = labelValues.join('\u0001')
    let s = this.series.get(key)
    if (!s) {
      s = { labels: this.labelsOf(labelValues), value: 0 }
      this.series.set(key, s)
    }
    s.value += by
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }> {
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      aggregator: this.aggregator,
      values: [...this.series.values()].map((s) => ({ labels: s.labels, value: s.value })),
    }
  }
}

export class FastHistogram extends FastMetric {
  readonly type = 'histogram'
  private readonly series = new Map<string, HistogramSeries>()

  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    private readonly buckets: readonly number[],
  ) {
    super(name, help, labelNames)
  }

  observe(labelValues: readonly string[], value: number): void {
    const key = labelValues.join('\u0001')
    let s = this.series.get(key)
    if (!s) {
      s = { labels: this.labelsOf(labelValues), counts: new Array<number>(this.buckets.length + 1).fill(0), sum: 0, count: 0 }
      this.series.set(key, s)
    }
    let i = 0
    while (i < this.buckets.length && value > this.buckets[i]!) i++
    s.counts[i]!++
    s.sum += value
    s.count++
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }> {
    const values: Sample[] = []
    for (const s of this.series.values()) {
      let cumulative = 0
      this.buckets.forEach((b, i) => {
        cumulative += s.counts[i]!
        values.push({ metricName: `${this.name}_bucket`, labels: { ...s.labels, le: b }, value: cumulative })
      })
      values.push({ metricName: `${this.name}_bucket`, labels: { ...s.labels, le: '+Inf' }, value: s.count })
      values.push({ metricName: `${this.name}_sum`, labels: s.labels, value: s.sum })
      values.push({ metricName: `${this.name}_count`, labels: s.labels, value: s.count })
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values }
  }
}
