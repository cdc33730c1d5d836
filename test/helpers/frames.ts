import type { EventSubscription, StreamFrame } from '../../src/core/session-service.js'

/** Takes up to `n` frames from a subscription, batch by batch (fewer when it ends first). */
export async function takeFrames(sub: EventSubscription, n: number): Promise<StreamFrame[]> {
  const out: StreamFrame[] = []
  const it = sub[Symbol.asyncIterator]()
  while (out.length < n) {
    const r = await it.next()
    if (r.done) break
    out.push(...r.value)
  }
  return out
}
