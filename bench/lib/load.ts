import autocannon, { type AutocannonOptions } from 'autocannon'
import type { ServerChild } from './child.js'

/** One autocannon run against a server child: what the HTTP benchmarks record. */
export interface Load {
  reqPerSec: number
  p50: number
  p90: number
  p99: number
  mean: number
  total: number
  non2xx: number
  errors: number
  timeouts: number
  statusCodes: Record<string, number>
  /** Responses in each second of the run (autocannon ticks). */
  perSecond: number[]
  /** Server CPU time / wall time over the run (1 = one core busy). */
  serverCpu: number
}

/** Status codes summed over runs. */
export function statusCodes(ls: readonly Load[]): Record<string, number> {
  const out: Record<string, number> = {}
  for (const l of ls) for (const [k, v] of Object.entries(l.statusCodes)) out[k] = (out[k] ?? 0) + v
  return out
}

/** The mean of several rounds of one configuration (status codes summed, the last round's per-second counts). */
export function meanLoad(ls: readonly Load[]): Load {
  const avg = (pick: (l: Load) => number) => ls.reduce((a, l) => a + pick(l), 0) / ls.length
  return {
    reqPerSec: avg((l) => l.reqPerSec),
    p50: avg((l) => l.p50),
    p90: avg((l) => l.p90),
    p99: avg((l) => l.p99),
    mean: avg((l) => l.mean),
    total: avg((l) => l.total),
    non2xx: avg((l) => l.non2xx),
    errors: avg((l) => l.errors),
    timeouts: avg((l) => l.timeouts),
    statusCodes: statusCodes(ls),
    perSecond: ls.at(-1)?.perSecond ?? [],
    serverCpu: avg((l) => l.serverCpu),
  }
}

/**
 * One autocannon run against a server child (pipelining 1, timeout 30 s), with
 * the server's CPU time over the run and the responses per second: the load step every HTTP
 * benchmark shares.
 */
export async function runLoad(
  server: ServerChild,
  opts: Omit<AutocannonOptions, 'pipelining' | 'timeout'> & { duration: number },
): Promise<Load> {
  const before = await server.stats(false)
  const w0 = performance.now()
  const inst = autocannon({ pipelining: 1, timeout: 30, ...opts })
  const perSecond: number[] = []
  inst.on('tick', (t: { counter: number }) => {
    if (perSecond.length < opts.duration) perSecond.push(t.counter)
  })
  const r = await inst
  const wallUs = (performance.now() - w0) * 1000
  const after = await server.stats(false)
  return {
    reqPerSec: r.requests.average,
    p50: r.latency.p50,
    p90: r.latency.p90,
    p99: r.latency.p99,
    mean: r.latency.average,
    total: r['2xx'] + r.non2xx,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    statusCodes: Object.fromEntries(Object.entries(r.statusCodeStats ?? {}).map(([k, v]) => [k, Number(v.count)])),
    perSecond,
    serverCpu: (after.cpuUserUs + after.cpuSystemUs - before.cpuUserUs - before.cpuSystemUs) / wallUs,
  }
}
