import { BurrowError } from '../core/errors.js'
import type { RunningWork } from './live-session.js'

/**
 * Lets the running turns finish within `graceMs`; those still running then are interrupted
 * (`INTERRUPTED`, reason `shutdown`), and it resolves once they have recorded it.
 * `running()` is asked again at the deadline: what runs then is what gets interrupted.
 */
export async function drainTurns(running: () => RunningWork[], graceMs: number): Promise<void> {
  const all = Promise.allSettled(running().map((r) => r.done))
  let timer: NodeJS.Timeout | undefined
  const graceOver = new Promise<'timeout'>((res) => {
    timer = setTimeout(() => res('timeout'), graceMs)
  })
  const outcome = await Promise.race([all.then(() => 'done' as const), graceOver])
  clearTimeout(timer)
  if (outcome === 'done') return
  const left = running()
  for (const r of left) r.signal.abort(new BurrowError('INTERRUPTED', 'The service is shutting down.', { reason: 'shutdown' }))
  await Promise.allSettled(left.map((r) => r.done))
}
