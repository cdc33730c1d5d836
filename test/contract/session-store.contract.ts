// The conformance suite every SessionRepository backend must pass (in-memory, LMDB, later PostgreSQL).
import type { Test } from 'tap'
import type { SessionRepository } from '../../src/core/stores.js'
import { BurrowError } from '../../src/core/errors.js'
import { FILTER_SCAN_BUDGET } from '../../src/core/session-filter.js'
import { rebuild } from '../../src/session/session-reducer.js'
import { SessionLog, config, sessionId } from './fixtures.js'

export type RepositoryFactory = () => Promise<{
  repo: SessionRepository
  reopen?: () => Promise<SessionRepository>
  cleanup: () => Promise<void>
}>

async function commitAll(repo: SessionRepository, log: SessionLog, ...batches: Array<{ events: any[]; record: any }>) {
  for (const b of batches) await repo.commit(b.events, b.record)
  return log
}

export function sessionStoreContract(t: Test, factory: RepositoryFactory): void {
  const withRepo = (name: string, fn: (t: Test, repo: SessionRepository, ctx: Awaited<ReturnType<RepositoryFactory>>) => Promise<void>) =>
    t.test(name, async (t) => {
      const ctx = await factory()
      t.teardown(() => ctx.cleanup())
      await fn(t, ctx.repo, ctx)
    })

  withRepo('an unknown session is undefined', async (t, repo) => {
    t.equal(await repo.sessions.get(sessionId(1)), undefined)
    t.equal(await repo.sessions.tenantOf(sessionId(1)), undefined)
    t.equal(await repo.events.lastSeq(sessionId(1)), 0)
  })

  withRepo('tenantOf names the owner without loading the session, and writable() holds while writes work', async (t, repo) => {
    const log = new SessionLog(sessionId(9), config('tenant-b'))
    await commitAll(repo, log, log.create())
    t.equal(await repo.sessions.tenantOf(log.id), 'tenant-b')
    t.equal(repo.writable(), true)
  })

  withRepo('a committed snapshot reads back equal, and equals the rebuild of its log', async (t, repo) => {
    const log = new SessionLog(sessionId(1), config('tenant-a', { metadata: { k: 'v' }, max_total_tokens: 500 }))
    await commitAll(repo, log, log.create(), log.turn('one'), log.pausedTurn('two'))
    const got = await repo.sessions.get(log.id)
    t.same(got, log.record)
    t.same(rebuild(await repo.events.readAfter(log.id, 0)), got, 'rebuild(log) == snapshot')
    t.equal(got!.messages.length, 4)
    t.same(got!.message_seqs, log.record!.message_seqs)
    t.equal(got!.open_turn!.state, 'requires_action')
  })

  withRepo('a rewritten history (compaction) replaces the stored messages', async (t, repo) => {
    const log = new SessionLog(sessionId(2))
    await commitAll(repo, log, log.create(), log.turn('a'), log.turn('b'), log.turn('c'))
    const r = structuredClone(log.record!)
    // What a compaction commit looks like to a store: a new generation with fewer messages.
    r.messages = [{ role: 'user', content: [{ type: 'text', text: 'summary' }] }, ...r.messages.slice(-2)]
    r.message_seqs = [r.last_seq + 1, ...r.message_seqs.slice(-2)]
    r.message_turns = [3, ...r.message_turns.slice(-2)]
    r.compactions = 1
    r.last_seq += 1
    const e = {
      seq: r.last_seq,
      session_id: log.id,
      turn: 3,
      type: 'compaction_completed' as const,
      at: new Date().toISOString(),
      data: {
        summary_tokens: 1,
        messages_before: 6,
        messages_after: 3,
        summary: 'summary',
        discarded_seq_range: [2, 8] as [number, number],
      },
    }
    await repo.commit([e], r)
    const got = await repo.sessions.get(log.id)
    t.same(got!.messages, r.messages)
    t.same(got!.message_seqs, r.message_seqs)
    const more = structuredClone(r)
    more.messages.push({ role: 'user', content: [{ type: 'text', text: 'next' }] })
    more.message_seqs.push(more.last_seq + 1)
    more.message_turns.push(4)
    more.last_seq += 1
    await repo.commit(
      [{ ...e, seq: more.last_seq, type: 'turn_started', data: { input: [{ type: 'text', text: 'next' }], continuation: false } } as any],
      more,
    )
    t.same((await repo.sessions.get(log.id))!.messages, more.messages, 'appends after a rewrite')
  })

  withRepo('a turn whose input the provider rejected is taken out of the stored history, and the next turn appends', async (t, repo) => {
    const log = new SessionLog(sessionId(4))
    await commitAll(repo, log, log.create(), log.turn('kept'))
    const started = log.startTurn('rejected')
    await repo.commit(started.events, started.record)
    t.equal((await repo.sessions.get(log.id))!.messages.length, 3)
    const turn = log.record!.turn_count
    const failed = log.add(turn, {
      type: 'turn_failed',
      data: { code: 'PROVIDER_ERROR', message: 'bad request', reason: 'input_rejected', usage: { input_tokens: 0, output_tokens: 0 } },
    })
    t.equal(failed.record.messages.length, 2, 'the reducer rolled the turn back')
    await repo.commit(failed.events, failed.record)
    t.same(await repo.sessions.get(log.id), log.record)
    await commitAll(repo, log, log.turn('after'))
    const got = await repo.sessions.get(log.id)
    t.same(got, log.record)
    t.equal(got!.messages.length, 4)
    t.same(rebuild(await repo.events.readAfter(log.id, 0)), got, 'rebuild(log) == snapshot')
  })

  withRepo('a commit out of order throws and writes nothing', async (t, repo) => {
    const log = new SessionLog(sessionId(3))
    await commitAll(repo, log, log.create())
    const good = log.turn('x')
    const gap = { events: good.events.slice(1), record: good.record }
    await t.rejects(Promise.resolve(repo.commit(gap.events, gap.record)))
    t.equal(await repo.events.lastSeq(log.id), 1)
    t.same((await repo.sessions.get(log.id))!.last_seq, 1)
    await t.rejects(Promise.resolve(repo.commit([good.events[0]!, good.events[0]!], good.record)), 'duplicate seq')
    await repo.commit(good.events, good.record)
    t.equal(await repo.events.lastSeq(log.id), 4)
  })

  withRepo('list: newest first, cursor pages without gap or repeat, status filter, tenant scope', async (t, repo) => {
    const logs: SessionLog[] = []
    for (let i = 1; i <= 7; i++) {
      const log = new SessionLog(sessionId(100 + i), config(i === 4 ? 'tenant-b' : 'tenant-a'))
      await commitAll(repo, log, log.create(), log.turn(`t${i}`))
      logs.push(log)
    }
    await repo.commit(...(Object.values(logs[1]!.archive()) as [any, any]))
    await repo.commit(...(Object.values(logs[5]!.archive()) as [any, any]))
    const seen: string[] = []
    let cursor: string | undefined
    for (let page = 0; page < 10; page++) {
      const p = await repo.sessions.list('tenant-a', { limit: 2, ...(cursor ? { cursor } : {}) })
      seen.push(...p.items.map((i) => i.session_id))
      if (!p.next_cursor) break
      cursor = p.next_cursor
    }
    const expected = logs
      .filter((l) => l.cfg.tenant === 'tenant-a')
      .map((l) => l.id)
      .reverse()
    t.same(seen, expected, 'every session of the tenant once, newest first')
    const archived = await repo.sessions.list('tenant-a', { status: 'archived' })
    t.same(
      archived.items.map((i) => i.session_id),
      [logs[5]!.id, logs[1]!.id],
    )
    t.ok(archived.items.every((i) => i.status === 'archived'))
    const active = await repo.sessions.list('tenant-a', { status: 'active', limit: 100 })
    t.equal(active.items.length, 4)
    t.equal(active.next_cursor, null)
    const b = await repo.sessions.list('tenant-b', {})
    t.same(
      b.items.map((i) => i.session_id),
      [logs[3]!.id],
    )
    t.same(b.items[0], {
      session_id: logs[3]!.id,
      status: 'active',
      created_at: logs[3]!.record!.created_at,
      updated_at: logs[3]!.record!.updated_at,
      model: 'offline:echo',
      metadata: {},
      turn_count: 1,
      last_seq: 4,
      forked_from: null,
    })
    t.same((await repo.sessions.list('nobody', {})).items, [])
    await t.rejects(repo.sessions.list('tenant-a', { cursor: 'garbage' }), BurrowError)
  })

  withRepo('list filters: metadata (NUL characters included), creation and activity time, a fork and a change kept', async (t, repo) => {
    const tagged = (i: number, metadata: Record<string, string>) => new SessionLog(sessionId(200 + i), config('tenant-f', { metadata }))
    const a = tagged(1, { team: 'red', note: 'nul \u0000 inside' })
    const b = tagged(2, { team: 'blue' })
    const c = tagged(3, { team: 'red', stage: 'done' })
    for (const log of [a, b, c]) await commitAll(repo, log, log.create())
    const ids = async (q: Parameters<typeof repo.sessions.list>[1]) =>
      (await repo.sessions.list('tenant-f', q)).items.map((i) => i.session_id)
    t.same(await ids({ metadata: { team: 'red' } }), [c.id, a.id], 'metadata, newest first')
    t.same(await ids({ metadata: { team: 'red', stage: 'done' } }), [c.id], 'every pair')
    t.same(await ids({ metadata: { note: 'nul \u0000 inside' } }), [a.id], 'a value with a NUL character')
    const page = await repo.sessions.list('tenant-f', { metadata: { team: 'red' }, limit: 1 })
    t.same(await ids({ metadata: { team: 'red' }, limit: 1, cursor: page.next_cursor! }), [a.id], 'paged')
    const createdB = b.record!.created_at
    t.same(await ids({ created_after: createdB }), [c.id, b.id], 'created at or after')
    t.same(await ids({ created_before: createdB }), [a.id], 'created before')
    await commitAll(repo, a, a.turn('activity'))
    t.same(await ids({ updated_after: a.record!.updated_at }), [a.id], 'by last activity')
    const changed = a.add(1, { type: 'session_updated', data: { changes: { metadata: { team: 'green' }, system_prompt: 'Changed.' } } })
    await repo.commit(changed.events, changed.record)
    t.same(await ids({ metadata: { team: 'green' } }), [a.id], 'a change of metadata is listed')
    t.equal((await repo.sessions.get(a.id))?.config.system_prompt, 'Changed.', 'and the configuration kept')
    const fork = new SessionLog(sessionId(299), config('tenant-f', { forked_from: { session_id: a.id, seq: 2 } }))
    await commitAll(repo, fork, fork.create())
    t.same((await repo.sessions.list('tenant-f', { limit: 1 })).items[0]?.forked_from, { session_id: a.id, seq: 2 }, 'a fork says so')
  })

  withRepo('a filtered list scans at most FILTER_SCAN_BUDGET sessions per page, then hands on a cursor', async (t, repo) => {
    // The one match is the oldest: the first page ends after the budget with nothing in it.
    const match = new SessionLog(sessionId(10_000), config('tenant-s', { metadata: { find: 'me' } }))
    await commitAll(repo, match, match.create())
    for (let i = 1; i <= FILTER_SCAN_BUDGET; i += 100)
      await Promise.all(
        Array.from({ length: Math.min(100, FILTER_SCAN_BUDGET + 1 - i) }, async (_, j) => {
          const log = new SessionLog(sessionId(10_000 + i + j), config('tenant-s', { metadata: { find: 'not me' } }))
          await commitAll(repo, log, log.create())
        }),
      )
    const first = await repo.sessions.list('tenant-s', { metadata: { find: 'me' } })
    t.same(first.items, [], 'the budget ran out before the match')
    t.ok(first.next_cursor, 'with a cursor to go on from')
    const second = await repo.sessions.list('tenant-s', { metadata: { find: 'me' }, cursor: first.next_cursor! })
    t.same(
      second.items.map((i) => i.session_id),
      [match.id],
      'the next page finds it',
    )
    t.equal(second.next_cursor, null)
    t.equal((await repo.sessions.list('tenant-s', { limit: 100 })).items.length, 100, 'an unfiltered list is not budgeted')
  })

  withRepo('running turns are tracked; paused and finished ones are not', async (t, repo) => {
    const running = new SessionLog(sessionId(201))
    const paused = new SessionLog(sessionId(202))
    const done = new SessionLog(sessionId(203))
    await commitAll(repo, running, running.create(), running.turn('a'), running.startTurn('b'))
    await commitAll(repo, paused, paused.create(), paused.pausedTurn('p'))
    await commitAll(repo, done, done.create(), done.startTurn('x'))
    await repo.commit(
      ...(Object.values(
        done.add(1, { type: 'turn_failed', data: { code: 'PROVIDER_ERROR', message: 'x', usage: { input_tokens: 0, output_tokens: 0 } } }),
      ) as [any, any]),
    )
    t.same((await repo.sessions.runningTurns()).sort(), [running.id])
    const ids: string[] = []
    for await (const id of repo.sessions.allIds()) ids.push(id)
    t.same(ids.sort(), [running.id, paused.id, done.id].sort())
  })

  withRepo('delete purges events, snapshot, listing, idempotency records and projection state', async (t, repo) => {
    const log = new SessionLog(sessionId(301))
    const other = new SessionLog(sessionId(302))
    await commitAll(repo, log, log.create(), log.turn('a'))
    await commitAll(repo, other, other.create())
    await repo.idempotency.put(`tenant-a\u0000${log.id}\u0000k1`, {
      fingerprint: 'f',
      created_at: Date.now(),
      outcome: { ok: true, value: 1 },
    })
    await repo.idempotency.put(`tenant-a\u0000${other.id}\u0000k1`, {
      fingerprint: 'f',
      created_at: Date.now(),
      outcome: { ok: true, value: 2 },
    })
    await repo.deleteSession(log.id, 'tenant-a')
    t.equal(await repo.sessions.get(log.id), undefined)
    t.same(await repo.events.readAfter(log.id, 0), [])
    t.equal(await repo.events.lastSeq(log.id), 0)
    t.same(
      (await repo.sessions.list('tenant-a', {})).items.map((i) => i.session_id),
      [other.id],
    )
    t.equal(await repo.idempotency.get(`tenant-a\u0000${log.id}\u0000k1`), undefined)
    t.ok(await repo.idempotency.get(`tenant-a\u0000${other.id}\u0000k1`), "another session's record stays")
    t.notOk((await repo.projection.pending()).includes(log.id))
    t.equal(await repo.projection.checkpoint(log.id), 0)
  })

  withRepo('projection state: pending until projected up to the last commit', async (t, repo) => {
    const log = new SessionLog(sessionId(401))
    await commitAll(repo, log, log.create(), log.turn('a'))
    t.same(await repo.projection.pending(), [log.id])
    await repo.projection.projected(log.id, 2)
    t.same(await repo.projection.pending(), [log.id], 'still pending: seq 4 was committed')
    t.equal(await repo.projection.checkpoint(log.id), 2)
    await repo.projection.projected(log.id, 4)
    t.same(await repo.projection.pending(), [])
    await repo.projection.reset()
    t.same(await repo.projection.pending(), [log.id])
    t.equal(await repo.projection.checkpoint(log.id), 0)
  })

  withRepo('idempotency records: put, get, expire by prefix', async (t, repo) => {
    const rec = {
      fingerprint: 'abc',
      created_at: Date.now(),
      outcome: { ok: false as const, code: 'PROVIDER_ERROR', message: 'x', data: { turn: 1 } },
    }
    await repo.idempotency.put('t\u0000-\u0000key', rec)
    t.same(await repo.idempotency.get('t\u0000-\u0000key'), rec)
    await repo.idempotency.put('t\u0000-\u0000old', { ...rec, created_at: Date.now() - 25 * 3600 * 1000 })
    t.equal(await repo.idempotency.get('t\u0000-\u0000old'), undefined, 'older than 24 h is gone')
    await repo.idempotency.deletePrefix('t\u0000-\u0000')
    t.equal(await repo.idempotency.get('t\u0000-\u0000key'), undefined)
  })

  withRepo('state survives reopening the store', async (t, repo, ctx) => {
    if (!ctx.reopen) {
      t.pass('in-memory store: nothing to reopen')
      return
    }
    const log = new SessionLog(sessionId(501))
    await commitAll(repo, log, log.create(), log.turn('persist me'), log.startTurn('in flight'))
    await repo.close()
    const again = await ctx.reopen()
    t.same(await again.sessions.get(log.id), log.record)
    t.same(await again.sessions.runningTurns(), [log.id])
    t.same(await again.events.readAfter(log.id, 0), log.events)
  })

  withRepo('usage by turn over many turns, with compaction tokens on the last turn, reads back equal', async (t, repo, ctx) => {
    const log = new SessionLog(sessionId(601))
    await commitAll(repo, log, log.create())
    for (let i = 1; i <= 100; i++) {
      await commitAll(repo, log, log.turn(`turn ${i}`))
      // Now and then a manual compaction's usage lands on the turn that just ended (a closed turn).
      if (i % 33 === 0)
        await commitAll(
          repo,
          log,
          log.add(i, { type: 'compaction_failed', data: { error: 'x', usage: { input_tokens: 7, output_tokens: i } } }),
        )
    }
    await commitAll(repo, log, log.startTurn('open'))
    const got = await repo.sessions.get(log.id)
    t.equal(got!.usage_by_turn.length, 101)
    t.same(got!.usage_by_turn, log.record!.usage_by_turn)
    t.same(got, log.record)
    t.same(rebuild(await repo.events.readAfter(log.id, 0)), got, 'rebuild(log) == snapshot')
    if (ctx.reopen) {
      await repo.close()
      const again = await ctx.reopen()
      t.same(await again.sessions.get(log.id), log.record, 'after reopening')
    }
  })

  withRepo('a refused commit does not hold back the other sessions queued with it', async (t, repo) => {
    const a = new SessionLog(sessionId(701))
    const b = new SessionLog(sessionId(702))
    await commitAll(repo, a, a.create())
    await commitAll(repo, b, b.create())
    const good = a.turn('x')
    const results = await Promise.allSettled([
      repo.commit(good.events.slice(1), good.record),
      repo.commit(...(Object.values(b.turn('y')) as [any, any])),
    ])
    t.equal(results[0].status, 'rejected', 'the gap is refused')
    t.equal(results[1].status, 'fulfilled', 'the other session lands')
    t.same(await repo.sessions.get(b.id), b.record)
    t.equal(await repo.events.lastSeq(a.id), 1)
    await repo.commit(good.events, good.record)
    t.same(await repo.sessions.get(a.id), a.record)
  })
}
