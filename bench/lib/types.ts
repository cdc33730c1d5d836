import { realpathSync } from 'node:fs'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/** One measured quantity, optionally next to the baseline it is compared with. */
export interface Metric {
  name: string
  value: number
  unit: string
  /** The same quantity for the baseline (e.g. the hello-world route). */
  baseline?: number
  /** value / baseline, when a baseline is given. */
  ratio?: number
}

/** A pass/fail criterion: `actual op limit`. */
export interface Target {
  name: string
  actual: number
  op: '>=' | '<='
  limit: number
  unit: string
  pass: boolean
}

/** What every `bench/*.bench.ts` `run()` returns; bench/run.ts renders it into docs/benchmarks.md. */
export interface BenchResult {
  /** File stem: `turn-overhead` for bench/turn-overhead.bench.ts. */
  name: string
  title: string
  /** What is measured and how (markdown). */
  description: string
  /** The run's parameters (connections, duration, subscribers, env switches, …). */
  config: Record<string, string | number>
  metrics: Metric[]
  targets: Target[]
  pass: boolean
  /** Diagnoses, caveats, anything a reader of the numbers should know (markdown). */
  notes: string[]
  date: string
  durationSeconds: number
}

export function target(name: string, actual: number, op: '>=' | '<=', limit: number, unit: string): Target {
  return { name, actual, op, limit, unit, pass: op === '>=' ? actual >= limit : actual <= limit }
}

export function metric(name: string, value: number, unit: string, baseline?: number): Metric {
  return baseline === undefined ? { name, value, unit } : { name, value, unit, baseline, ratio: baseline === 0 ? NaN : value / baseline }
}

/** Percentile (nearest-rank) of an ascending-sorted array. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN
  const rank = Math.ceil((p / 100) * sorted.length)
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!
}

/** The median (the mean of the middle two for an even count; NaN for none). */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** True when `importMetaUrl` is the module node was started with (a bench run on its own). */
export function isMain(importMetaUrl: string): boolean {
  const entry = process.argv[1]
  if (!entry) return false
  try {
    return realpathSync(fileURLToPath(importMetaUrl)) === realpathSync(resolve(entry))
  } catch {
    return false
  }
}
