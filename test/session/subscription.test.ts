import t from 'tap'
import { Subscription } from '../../src/session/subscription.js'
import type { EventEnvelope } from '../../src/core/events.js'
import { takeFrames } from '../helpers/frames.js'

const ev = (seq: number, type: EventEnvelope['type'] = 'turn_started', text = ''): EventEnvelope =>
  ({ seq, session_id: 's', turn: 1, type, at: '2026-01-01T00:00:00.000Z', data: type === 'text_delta' ? { text } : {} }) as EventEnvelope

t.test('a subscriber that falls behind is dropped with a reason, not buffered forever', async (t) => {
  let removed = 0
  const sub = new Subscription(
    3,
    () => {
      removed++
    },
    's',
  )
  let ended = false
  sub.onEnd(() => {
    ended = true
  })
  t.equal(sub.push(ev(1)), true)
  t.equal(sub.push(ev(2)), true)
  t.equal(sub.push(ev(3)), true)
  t.equal(sub.push(ev(4)), false, 'the fourth frame overflows a limit of 3')
  t.ok(ended)
  t.equal(removed, 1)
  t.equal(sub.push(ev(5)), false, 'nothing more is accepted')
  const frames = await takeFrames(sub, 5)
  t.same(frames, [{ kind: 'control', control: { type: 'stream_closed', session_id: 's', data: { reason: 'slow_consumer' } } }])
})

t.test('queued text deltas of a turn are coalesced', async (t) => {
  const sub = new Subscription(10, () => {}, 's')
  sub.push(ev(1))
  for (const w of ['a', 'b', 'c']) sub.push(ev(1, 'text_delta', w))
  sub.push(ev(2, 'assistant_message'))
  const frames = await takeFrames(sub, 3)
  t.equal(frames.length, 3)
  t.same(frames[1], { kind: 'event', event: ev(1, 'text_delta', 'abc') })
})

t.test('frames ready together are taken as one batch', async (t) => {
  const sub = new Subscription(10, () => {}, 's')
  const it = sub[Symbol.asyncIterator]()
  const first = it.next()
  sub.push(ev(1))
  sub.push(ev(2))
  sub.push(ev(3))
  const r = await first
  t.same(
    (r.value as any[]).map((f) => f.event.seq),
    [1, 2, 3],
    'one wake-up for a synchronous burst',
  )
})

t.test('replay: pages as the reader takes them, then held live events, no gap and no duplicate', async (t) => {
  const log = Array.from({ length: 3000 }, (_, i) => ev(i + 1))
  const loads: number[] = []
  const load = async (after: number, limit: number) => {
    loads.push(after)
    return log.filter((e) => e.seq > after).slice(0, limit)
  }
  const sub = new Subscription(8, () => {}, 's') // a live queue of 8 frames: far fewer than the replay
  const got: number[] = []
  let pauses = 0
  const flow = sub.attach(
    (batch) => {
      for (const f of batch) if (f.kind === 'event') got.push(f.event.seq)
      // A slow socket: every other batch fills it; it drains on the next tick.
      if (got.length % 2 === 0) {
        pauses++
        setImmediate(() => flow.resume())
        return false
      }
      return true
    },
    () => {},
  )
  const replaying = sub.replay(load, await load(0, 500), 500)
  // Live events arrive while the replay runs (they are also in the log, as committed events are).
  for (let i = 3001; i <= 3020; i++) {
    log.push(ev(i))
    sub.push(ev(i))
  }
  await replaying
  await new Promise((r) => setTimeout(r, 20))
  sub.push(ev(3021))
  await new Promise((r) => setTimeout(r, 5))
  t.equal(got.length, 3021)
  t.ok(
    got.every((s, i) => s === i + 1),
    'every event once, in order',
  )
  t.ok(loads.length >= 6, `read in pages (${loads.length} loads)`)
  t.ok(pauses > 0, 'and waited for the reader')
  t.equal(sub.backlog, 0)
})

t.test('replay: when live events overflow while replaying, they are read from the log instead', async (t) => {
  const log = Array.from({ length: 10 }, (_, i) => ev(i + 1))
  const load = async (after: number, limit: number) => log.filter((e) => e.seq > after).slice(0, limit)
  const sub = new Subscription(3, () => {}, 's')
  const got: number[] = []
  sub.attach(
    (batch) => {
      for (const f of batch) if (f.kind === 'event') got.push(f.event.seq)
      return true
    },
    () => {},
  )
  const first = await load(0, 4)
  const replaying = sub.replay(load, first, 4)
  for (let i = 11; i <= 30; i++) {
    log.push(ev(i))
    sub.push(ev(i))
  } // 20 live events against a hold limit of 3
  await replaying
  await new Promise((r) => setTimeout(r, 5))
  t.same(
    got,
    Array.from({ length: 30 }, (_, i) => i + 1),
  )
})

t.test('push mode: batches go to the writer; a full writer pauses delivery until resumed', async (t) => {
  const wakes: Subscription[] = []
  const sub = new Subscription(
    5,
    () => {},
    's',
    (s) => wakes.push(s),
  )
  const got: number[][] = []
  let accept = true
  let done = false
  const flow = sub.attach(
    (batch) => {
      got.push(batch.map((f) => (f.kind === 'event' ? f.event.seq : -1)))
      return accept
    },
    () => {
      done = true
    },
  )
  sub.push(ev(1))
  sub.push(ev(2))
  t.equal(wakes.length, 1, 'one wake-up for the burst')
  wakes.shift()!.wake()
  t.same(got, [[1, 2]])
  accept = false
  sub.push(ev(3))
  wakes.shift()!.wake()
  t.same(got, [[1, 2], [3]], 'delivered, and the writer said it is full')
  sub.push(ev(4))
  sub.push(ev(5))
  t.equal(wakes.length, 0, 'paused: no wake-ups while the writer is full')
  accept = true
  flow.resume()
  t.same(got.at(-1), [4, 5], 'resume flushes what queued meanwhile')
  sub.closeWith({ type: 'stream_closed', session_id: 's', data: { reason: 'shutdown' } })
  wakes.shift()!.wake()
  t.same(got.at(-1), [-1], 'the final frame')
  t.ok(done, 'then the end is signalled')
})
