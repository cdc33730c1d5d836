// The conformance suite for the event log of every SessionRepository backend.
import type { Test } from 'tap'
import type { RepositoryFactory } from './session-store.contract.js'
import { SessionLog, sessionId } from './fixtures.js'

export function eventStoreContract(t: Test, factory: RepositoryFactory): void {
  t.test('events come back in seq order, by range and limit, per session', async (t) => {
    const { repo, cleanup } = await factory()
    t.teardown(cleanup)
    const a = new SessionLog(sessionId(1))
    const b = new SessionLog(sessionId(2))
    for (const c of [a.create(), b.create(), a.turn('1'), b.turn('x'), a.turn('2'), a.turn('3')]) await repo.commit(c.events, c.record)
    t.same(await repo.events.readAfter(a.id, 0), a.events)
    t.same(
      (await repo.events.readAfter(a.id, 3)).map((e) => e.seq),
      [4, 5, 6, 7, 8, 9, 10],
    )
    t.same(
      (await repo.events.readAfter(a.id, 3, 6)).map((e) => e.seq),
      [4, 5, 6],
    )
    t.same(
      (await repo.events.readAfter(a.id, 0, Infinity, 2)).map((e) => e.seq),
      [1, 2],
    )
    t.same(await repo.events.readAfter(a.id, 10), [])
    t.same(await repo.events.readAfter(b.id, 0), b.events, 'no mixing between sessions')
    t.equal(await repo.events.lastSeq(a.id), 10)
    t.equal(await repo.events.lastSeq(b.id), 4)
  })

  t.test('a long log stays gapless and reads back whole', async (t) => {
    const { repo, cleanup } = await factory()
    t.teardown(cleanup)
    const log = new SessionLog(sessionId(3))
    const c = log.create()
    await repo.commit(c.events, c.record)
    for (let i = 0; i < 400; i++) {
      const x = log.turn(`turn ${i}`)
      await repo.commit(x.events, x.record)
    }
    const all = await repo.events.readAfter(log.id, 0)
    t.equal(all.length, 1201)
    t.ok(
      all.every((e, i) => e.seq === i + 1),
      'gapless from 1',
    )
    t.same(all, log.events)
  })

  t.test('concurrent commits of different sessions all land', async (t) => {
    const { repo, cleanup } = await factory()
    t.teardown(cleanup)
    const logs = Array.from({ length: 20 }, (_, i) => new SessionLog(sessionId(1000 + i)))
    await Promise.all(
      logs.map(async (l) => {
        const c = l.create()
        await repo.commit(c.events, c.record)
        for (let i = 0; i < 5; i++) {
          const x = l.turn(`${i}`)
          await repo.commit(x.events, x.record)
        }
      }),
    )
    for (const l of logs) t.same(await repo.events.readAfter(l.id, 0), l.events)
  })

  t.test('commits queued without waiting for each other land in order, and reads start at any seq', async (t) => {
    const { repo, cleanup } = await factory()
    t.teardown(cleanup)
    const log = new SessionLog(sessionId(4))
    const other = new SessionLog(sessionId(5))
    // What the service does: a turn's events are handed over as they happen, without awaiting each commit.
    const commits = [log.create(), other.create(), log.startTurn('a'), other.turn('x')]
    const more = [
      log.add(1, {
        type: 'assistant_message',
        data: {
          message: { role: 'assistant', content: [{ type: 'text', text: 'A' }] },
          usage: { input_tokens: 1, output_tokens: 1 },
          stop_reason: 'end_turn',
          model: 'offline:echo',
          step: 1,
          client_tool_call_ids: [],
        },
      }),
      log.add(1, {
        type: 'turn_completed',
        data: { output_text: 'A', usage: { input_tokens: 1, output_tokens: 1 }, stop_reason: 'end_turn' },
      }),
      log.turn('b'),
      log.turn('c'),
    ]
    await Promise.all([...commits, ...more].map((c) => repo.commit(c.events, c.record)))
    const all = log.events
    t.equal(all.length, 10)
    t.same(await repo.events.readAfter(log.id, 0), all)
    for (let after = 0; after <= all.length; after++) {
      t.same(
        (await repo.events.readAfter(log.id, after)).map((e) => e.seq),
        all.slice(after).map((e) => e.seq),
        `after ${after}`,
      )
      t.same(
        (await repo.events.readAfter(log.id, after, after + 2)).map((e) => e.seq),
        all.slice(after, after + 2).map((e) => e.seq),
        `after ${after}, up to ${after + 2}`,
      )
      t.same(
        (await repo.events.readAfter(log.id, after, Infinity, 1)).map((e) => e.seq),
        all.slice(after, after + 1).map((e) => e.seq),
        `after ${after}, limit 1`,
      )
    }
    t.same(await repo.events.readAfter(log.id, 3, 3), [], 'an empty range')
    t.same(await repo.events.readAfter(other.id, 0), other.events)
    t.same(await repo.sessions.get(log.id), log.record, 'the snapshot is the one after the last commit')
  })
}
