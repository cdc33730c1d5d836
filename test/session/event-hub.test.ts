// The event hub on its own: fan-out per session and per tenant, the replay buffer, replays.
import t from 'tap'
import type { EventEnvelope } from '../../src/core/events.js'
import type { StreamFrame } from '../../src/core/session-service.js'
import { EventHub } from '../../src/session/event-hub.js'
import { takeFrames } from '../helpers/frames.js'

const ev = (sid: string, seq: number, type: EventEnvelope['type'] = 'turn_started'): EventEnvelope =>
  ({
    seq,
    session_id: sid,
    turn: 1,
    type,
    at: '2026-01-01T00:00:00.000Z',
    data: type === 'text_delta' ? { text: 'x' } : {},
  }) as EventEnvelope

const seqs = (frames: StreamFrame[]) => frames.flatMap((f) => (f.kind === 'event' ? [f.event.seq] : []))

t.test('events reach the session’s subscribers and its tenant’s, not another tenant’s', async (t) => {
  const hub = new EventHub({ bufferSize: 10, queueLimit: 100 })
  hub.publish(ev('s1', 1))
  t.equal(hub.bufferStart('s1'), null, 'a session without a channel is not buffered')
  hub.open('s1', 'a')
  hub.open('s2', 'b')
  const own = await hub.subscribeSession('s1', undefined, 0, async () => [])
  const tenantA = hub.subscribeTenant('a')
  const tenantB = hub.subscribeTenant('b')
  t.ok(hub.hasListeners('s1'))
  t.equal(hub.subscriberCount('s1'), 1)
  hub.publish(ev('s1', 1))
  hub.publish(ev('s2', 1))
  t.same(seqs(await takeFrames(own, 1)), [1])
  t.same(
    (await takeFrames(tenantA, 1)).map((f) => f.kind === 'event' && f.event.session_id),
    ['s1'],
  )
  t.same(
    (await takeFrames(tenantB, 1)).map((f) => f.kind === 'event' && f.event.session_id),
    ['s2'],
  )
  tenantB.close()
  t.notOk(hub.hasListeners('s2'), 'a closed subscription stops counting')
})

t.test('the buffer keeps the last stored events, never text deltas', async (t) => {
  const hub = new EventHub({ bufferSize: 3, queueLimit: 100 })
  hub.open('s', 't')
  for (let seq = 1; seq <= 5; seq++) hub.publish(ev('s', seq))
  hub.publish(ev('s', 5, 'text_delta'))
  t.equal(hub.bufferStart('s'), 3)
  t.same(
    hub.buffered('s', 0).map((e) => e.seq),
    [3, 4, 5],
  )
  t.same(
    hub.buffered('s', 3, 4).map((e) => e.seq),
    [4],
  )
})

t.test('a session subscription replays what it asks for, then tails live, with no gap or duplicate at the seam', async (t) => {
  const hub = new EventHub({ bufferSize: 10, queueLimit: 100 })
  hub.open('s', 't')
  const log = [1, 2, 3, 4].map((seq) => ev('s', seq))
  const sub = await hub.subscribeSession('s', 1, 4, async (from, limit) => log.filter((e) => e.seq > from).slice(0, limit))
  hub.publish(ev('s', 5))
  t.same(seqs(await takeFrames(sub, 4)), [2, 3, 4, 5])
  sub.close()
})

t.test('a replay that cannot start where asked says so first', async (t) => {
  const hub = new EventHub({ bufferSize: 10, queueLimit: 100 })
  hub.open('s', 't')
  const sub = await hub.subscribeSession('s', 0, 6, async (from) => [5, 6].filter((s) => s > from).map((s) => ev('s', s)))
  const frames = await takeFrames(sub, 3)
  t.same(frames[0], {
    kind: 'control',
    control: { type: 'stream_truncated', session_id: 's', data: { requested_after: 0, first_seq: 5, reason: 'events_unavailable' } },
  })
  t.same(seqs(frames), [5, 6])
  sub.close()
})

t.test('dropping a session ends its subscriptions with the reason; a shutdown ends every stream', async (t) => {
  const hub = new EventHub({ bufferSize: 10, queueLimit: 100 })
  hub.open('s', 't')
  hub.open('r', 't')
  const deleted = await hub.subscribeSession('s', undefined, 0, async () => [])
  hub.drop('s', { type: 'stream_closed', session_id: 's', data: { reason: 'session_deleted' } })
  t.same(await takeFrames(deleted, 2), [
    { kind: 'control', control: { type: 'stream_closed', session_id: 's', data: { reason: 'session_deleted' } } },
  ])
  t.equal(hub.bufferStart('s'), null, 'its buffer went with it')
  const live = await hub.subscribeSession('r', undefined, 0, async () => [])
  const tenant = hub.subscribeTenant('t')
  hub.closeAll('shutdown')
  t.match(await takeFrames(live, 2), [{ kind: 'control', control: { type: 'stream_closed', data: { reason: 'shutdown' } } }])
  t.match(await takeFrames(tenant, 2), [
    { kind: 'control', control: { type: 'stream_closed', session_id: null, data: { reason: 'shutdown' } } },
  ])
})

t.test('another replica’s events: no duplicate of what was published, a gap filled from the log, nothing kept nobody heard', async (t) => {
  const hub = new EventHub({ bufferSize: 10, queueLimit: 100, replicated: true })
  hub.open('s', 't')
  const log = [1, 2, 3, 4, 5].map((seq) => ev('s', seq))
  const reads: number[] = []
  const load = async (from: number, limit: number) => {
    reads.push(from)
    return log.filter((e) => e.seq > from).slice(0, limit)
  }
  t.ok(hub.hasListeners('s'), 'with replicas, every session counts as listened to (its deltas go to the others)')
  const sub = await hub.subscribeSession('s', 1, 1, load)
  const tenant = hub.subscribeTenant('t')
  t.ok(hub.listening('s', 't'))
  hub.publishRemote(ev('s', 2), 't')
  hub.publishRemote(ev('s', 2), 't') // a catch-up after a reconnection reads it again
  t.equal(hub.publishedSeq('s'), 2)
  // Seq 3 and 4 never reached this hub: 5 is preceded by them, read from the log.
  hub.publishRemote(ev('s', 5), 't')
  t.same(seqs(await takeFrames(sub, 4)), [2, 3, 4, 5], 'the gap filled from the log, in order, once')
  t.same(reads, [2])
  t.same(seqs(await takeFrames(tenant, 2)), [2, 5], 'the tenant stream: each event the hub published, once')
  sub.close()
  tenant.close()
  t.notOk(hub.listening('s', 't'))
  log.push(ev('s', 6))
  hub.passed('s', 6)
  t.equal(hub.bufferStart('s'), null, 'events nobody here heard: the buffer starts afresh (replays read the log)')
  const late = await hub.subscribeSession('s', 4, 4, load)
  t.same(seqs(await takeFrames(late, 2)), [5, 6], 'a subscriber behind what the hub heard is replayed from the log')
  late.close()
})

t.test('a remote event of a session without a channel here reaches its tenant’s subscribers only', async (t) => {
  const hub = new EventHub({ bufferSize: 10, queueLimit: 100, replicated: true })
  const tenant = hub.subscribeTenant('t')
  const other = hub.subscribeTenant('u')
  t.ok(hub.listening('elsewhere', 't'))
  hub.publishRemote(ev('elsewhere', 1, 'session_created'), 't')
  hub.publishRemote(ev('elsewhere', 1, 'text_delta'), 't')
  const frames = await takeFrames(tenant, 2)
  t.same(
    frames.map((f) => f.kind === 'event' && f.event.type),
    ['session_created', 'text_delta'],
  )
  other.close()
  tenant.close()
})

t.test('a session loaded again after another replica wrote it: its subscribers stay, and get every event once, in order', async (t) => {
  const hub = new EventHub({ bufferSize: 10, queueLimit: 100, replicated: true })
  const log = [1, 2, 3, 4, 5, 6].map((n) => ev('s', n))
  const reads: number[] = []
  const load = async (after: number, limit: number) => {
    reads.push(after)
    return log.filter((e) => e.seq > after).slice(0, limit)
  }
  hub.open('s', 't')
  hub.publish(ev('s', 1))
  hub.publish(ev('s', 2))
  // Started live at seq 2 (no Last-Event-ID), before the other replica's 3..5.
  const live = await hub.subscribeSession('s', undefined, 2, load, 2)
  t.same(reads, [], 'nothing to replay at the start')
  hub.reloaded('s', 5)
  t.equal(hub.bufferStart('s'), null, 'the replay buffer, which misses 3..5, starts afresh')
  t.equal(hub.subscriberCount('s'), 1, 'the subscriber stays')
  // This replica's next event comes before the feed publishes 3..5: they are read from the log first.
  hub.publish(ev('s', 6))
  for (const n of [3, 4, 5]) hub.publishRemote(ev('s', n), 't')
  t.same(seqs(await takeFrames(live, 4)), [3, 4, 5, 6])
  t.same(reads, [2])
  hub.publish(ev('s', 7))
  t.same(seqs(await takeFrames(live, 1)), [7], 'still live, nothing twice')
  live.close()
})
