// The tenant journal on LMDB: a row per commit of a session, numbered per tenant in commit
// order, durable with its events (the same transaction), pruned past its bound, kept across a reopen.
import t, { type Test } from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LmdbSessionRepository } from '../../src/store/lmdb-session-repository.js'
import { JOURNAL_ROW_SPAN } from '../../src/core/stores.js'
import { config, SessionLog, sessionId } from '../contract/fixtures.js'

async function repoIn(t: Test, opts: { journalKeep?: number; durability?: 'fsync' | 'relaxed' } = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-journal-'))
  const open = () => LmdbSessionRepository.open(dir, { durability: 'fsync', idempotencyTtlMs: 3_600_000, ...opts })
  const state = { repo: await open() }
  t.teardown(async () => {
    await state.repo.close().catch(() => undefined)
    await rm(dir, { recursive: true, force: true })
  })
  return { state, reopen: async () => (await state.repo.close(), (state.repo = await open())) }
}

/** Every event the journal lists for a tenant, in journal order, as `session:seq`. */
async function listed(repo: LmdbSessionRepository, tenant: string): Promise<string[]> {
  const out: string[] = []
  for (const row of repo.journal.rowsFrom(tenant, 0, 1_000_000))
    for (const e of await repo.events.readAfter(row.sessionId, row.first - 1, row.last)) out.push(`${e.session_id}:${e.seq}`)
  return out
}

t.test('rows follow commit order per tenant, and cover every committed event once', async (t) => {
  const { state, reopen } = await repoIn(t)
  const a = new SessionLog(sessionId(1), config('tenant-a'))
  const b = new SessionLog(sessionId(2), config('tenant-a'))
  const c = new SessionLog(sessionId(3), config('tenant-b'))
  const order: string[] = []
  const advanced: string[][] = []
  state.repo.journal.onAdvance((tenants) => advanced.push([...tenants]))
  for (const x of [a.create(), b.create(), c.create(), a.turn('1'), b.turn('2'), a.turn('3'), c.turn('4')]) {
    await state.repo.commit(x.events, x.record)
    if (x.record.config.tenant === 'tenant-a') for (const e of x.events) order.push(`${e.session_id}:${e.seq}`)
  }
  t.same(await listed(state.repo, 'tenant-a'), order, "tenant-a's events, in the order they were committed")
  t.same(
    (await listed(state.repo, 'tenant-b')).map((s) => s.split(':')[0]),
    c.events.map(() => c.id),
    'another tenant has its own journal',
  )
  const rows = state.repo.journal.rowsFrom('tenant-a', 0, 100)
  t.same(
    rows.map((r) => r.pos),
    rows.map((_, i) => i + 1),
    'positions count from 1 without gaps',
  )
  t.equal(state.repo.journal.head('tenant-a'), rows.length)
  t.equal(state.repo.journal.oldest('tenant-a'), 1)
  t.ok(advanced.length > 0 && advanced.every((x) => x.length > 0), 'listeners hear of each advance')

  await reopen()
  t.equal(state.repo.journal.head('tenant-a'), rows.length, 'kept across a reopen')
  const more = a.turn('after the reopen')
  await state.repo.commit(more.events, more.record)
  t.equal(state.repo.journal.rowsFrom('tenant-a', rows.length + 1, 10)[0]?.first, more.events[0]!.seq, 'and numbering goes on')
})

t.test('a commit of more events than a row spans takes several rows', async (t) => {
  const { state } = await repoIn(t)
  const a = new SessionLog(sessionId(4))
  const created = a.create()
  await state.repo.commit(created.events, created.record)
  const events = []
  let record = created.record
  for (let i = 0; i < 700; i++) {
    const x = a.turn(`t${i}`)
    events.push(...x.events)
    record = x.record
  }
  t.ok(events.length > JOURNAL_ROW_SPAN)
  await state.repo.commit(events, record)
  const rows = state.repo.journal.rowsFrom(a.cfg.tenant, 2, 100)
  t.ok(rows.length >= 2)
  t.ok(rows.every((r) => r.last - r.first + 1 <= JOURNAL_ROW_SPAN))
  t.equal(rows[0]!.first, events[0]!.seq)
  t.equal(rows[rows.length - 1]!.last, events[events.length - 1]!.seq)
  for (let i = 1; i < rows.length; i++) t.equal(rows[i]!.first, rows[i - 1]!.last + 1, 'rows follow on')
})

t.test('old rows are pruned past the bound; a deleted session reads as nothing', async (t) => {
  const { state } = await repoIn(t, { journalKeep: 1500, durability: 'relaxed' })
  const a = new SessionLog(sessionId(5))
  const b = new SessionLog(sessionId(6))
  for (const x of [a.create(), b.create()]) await state.repo.commit(x.events, x.record)
  for (let i = 0; i < 2100; i++) {
    const x = (i % 2 === 0 ? a : b).turn(`t${i}`)
    await state.repo.commit(x.events, x.record)
  }
  const head = state.repo.journal.head(a.cfg.tenant)
  t.ok(head >= 2048, `head ${head}`)
  const oldest = state.repo.journal.oldest(a.cfg.tenant)
  t.ok(oldest > 1 && head - oldest < 1500 + 1024, `pruned to ${oldest}..${head}`)
  t.same(state.repo.journal.rowsFrom(a.cfg.tenant, 0, 1)[0]?.pos, oldest, 'reading from before the oldest starts at the oldest')

  await state.repo.deleteSession(b.id, b.cfg.tenant)
  const rows = state.repo.journal.rowsFrom(a.cfg.tenant, head - 3, 10)
  const bRow = rows.find((r) => r.sessionId === b.id)!
  t.ok(bRow, "the deleted session's rows stay")
  t.same(await state.repo.events.readAfter(bRow.sessionId, bRow.first - 1, bRow.last), [], 'and read as nothing')
})
