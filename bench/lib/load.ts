/** One autocannon run against a server child: what the HTTP benchmarks record. */
export interface Load {
  reqPerSec: number; p50: number; p90: number; p99: number; mean: number; total: number
  non2xx: number; errors: number; timeouts: number; statusCodes: Record<string, number>
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
    reqPerSec: avg((l) => l.reqPerSec), p50: avg((l) => l.p50), p90: avg((l) => l.p90), p99: avg((l) => l.p99), mean: avg((l) => l.mean),
    total: avg((l) => l.total), non2xx: avg((l) => l.non2xx), errors: avg((l) => l.errors), timeouts: avg((l) => l.timeouts),
    statusCodes: statusCodes(ls), perSecond: ls.at(-1)?.perSecond ?? [], serverCpu: avg((l) => l.serverCpu),
  }
}
