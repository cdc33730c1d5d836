// The tenant journal on PostgreSQL: rows ordered by the committing transaction's id and shown
// only once every older transaction has ended — so a commit that started first but finished last
// is still delivered before the later ones, never after a reader moved past it. Pruned past its
// bound (a resume from before is told so); a commit of more events than a row spans keeps a
// resume gapless through the real API.
import t, { type Test } from 'tap'
import pg from 'pg'
import { JOURNAL_ROW_SPAN, type JournalRow } from '../../src/core/stores.js'
import { PgSessionRepository } from '../../src/store/pg-session-repository.js'
import { config, SessionLog, sessionId } from '../contract/fixtures.js'
import { eventually, startBurrow } from '../helpers/harness.js'
import { tempDatabase } from '../helpers/pg.js'
import type { SseFrame } from '../helpers/sse-client.js'

async function repoIn(t: Test, url: string, journalKeep?: number): Promise<PgSessionRepository> {
  const repo = await PgSessionRepository.open({ url, poolSize: 4, replicaId: 'journal-test', idempotencyTtlMs: 3_600_000, journalKeep })
  t.teardown(() => repo.close())
  return repo
}

/**
 * Every row of the tenant after `after`, once no older transaction of the cluster holds them back:
 * the tests of other files run transactions on the same PostgreSQL meanwhile (each in a database
 * of its own, but transaction ids are the cluster's).
 */
async function settledRows(repo: PgSessionRepository, tenant: string, after = -1): Promise<{ rows: JournalRow[]; waiting: boolean }> {
  const settled = await eventually(async () => {
    const r = await rows(repo, tenant, after)
    return r.waiting ? undefined : r
  }, 20_000)
  return settled!
}

/** Every readable row of the tenant after `after`. */
async function rows(repo: PgSessionRepository, tenant: string, after = -1): Promise<{ rows: JournalRow[]; waiting: boolean }> {
  const out: JournalRow[] = []
  for (;;) {
    const page = await repo.journal.rowsAfter(tenant, after, 100)
    out.push(...page.rows)
    if (page.rows.length === 0 || page.waiting) return { rows: out, waiting: page.waiting }
    const last = page.rows.at(-1)!
    after = last.base + Math.min(last.last - last.first, JOURNAL_ROW_SPAN - 1)
  }
}

t.test('a commit that started first is delivered first, even when it ends last', async (t) => {
  const db = await tempDatabase(t, 'journal_order')
  const repo = await repoIn(t, db.url)
  const a = new SessionLog(sessionId(1), config('tenant-a'))
  const b = new SessionLog(sessionId(2), config('tenant-a'))
  const made = a.create()
  await repo.commit(made.events, made.record)
  const before = await settledRows(repo, 'tenant-a')
  t.same(
    before.rows.map((r) => [r.sessionId, r.first, r.last]),
    [[a.id, 1, made.events.length]],
  )

  // Another transaction holds a's row: a's next commit takes its transaction id, then waits.
  const locker = new pg.Client({ connectionString: db.url })
  await locker.connect()
  t.teardown(() => locker.end())
  await locker.query('BEGIN')
  await locker.query('SELECT 1 FROM sessions WHERE session_id = $1 FOR UPDATE', [a.id])
  const slow = a.turn('started first')
  const slowCommit = repo.commit(slow.events, slow.record)
  await eventually(async () => {
    const r = await locker.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'", [
      db.name,
    ])
    return r.rows[0].n === 1
  })
  const fast = b.create()
  await repo.commit(fast.events, fast.record) // committed while a's commit still waits
  const during = await rows(repo, 'tenant-a', before.rows[0]!.base + JOURNAL_ROW_SPAN - 1)
  t.same(during.rows, [], "b's row is not shown while an older transaction runs")
  t.ok(during.waiting, 'and the reader is told to ask again')

  await locker.query('COMMIT')
  await slowCommit
  const after = await settledRows(repo, 'tenant-a')
  t.same(
    after.rows.map((r) => r.sessionId),
    [a.id, a.id, b.id],
    "a's second commit comes before b's, though b's committed first",
  )
  t.notOk(after.waiting)
  const bases = after.rows.map((r) => r.base)
  t.ok(
    bases.every((x, i) => i === 0 || x > bases[i - 1]!),
    'bases increase',
  )
  t.same(await settledRows(repo, 'tenant-b'), { rows: [], waiting: false }, 'another tenant has its own journal')
})

t.test('where a stream starts: now, after an id, or told why not', async (t) => {
  const db = await tempDatabase(t, 'journal_start')
  const repo = await repoIn(t, db.url, 100)
  const a = new SessionLog(sessionId(3), config('tenant-a'))
  const made = a.create()
  await repo.commit(made.events, made.record)
  const now = await repo.journal.start('tenant-a', undefined)
  t.equal(now.truncated, undefined)
  t.same((await rows(repo, 'tenant-a', now.after)).rows, [], 'from now: what was committed before is not replayed')
  const unknown = await repo.journal.start('tenant-a', 999_999_999_999_999)
  t.equal(unknown.truncated?.reason, 'unknown_position', 'an id from a transaction not yet handed out')

  // Pruning: after PRUNE_EVERY (1024) commits of this replica, the newest `keep` (100) rows stay.
  for (let i = 0; i < 1030; i++) {
    const x = a.turn(`t${i}`)
    await repo.commit(x.events, x.record)
  }
  await eventually(async () => (await rows(repo, 'tenant-a')).rows.length <= 100 + 7)
  await repo.journal.idle()
  const kept = (await settledRows(repo, 'tenant-a')).rows
  t.ok(kept.length >= 100, `${kept.length} rows kept`)
  const from0 = await repo.journal.start('tenant-a', 0)
  t.equal(from0.truncated?.reason, 'events_unavailable', 'a resume from before the oldest kept row is told so')
  t.ok(from0.truncated!.first <= kept[0]!.base, 'and starts no later than the oldest kept row')
  t.same((await settledRows(repo, 'tenant-a', from0.after)).rows[0], kept[0], 'where it starts')
  const inside = await repo.journal.start('tenant-a', kept[5]!.base)
  t.same(inside, { after: kept[5]!.base }, 'a kept id resumes where it was')
})

t.test('a commit of more events than a row spans: ids up to the span, then the tail repeats on a resume inside it', async (t) => {
  const db = await tempDatabase(t, 'journal_tail')
  const repo = await repoIn(t, db.url)
  const log = new SessionLog(sessionId(4), config('default'))
  const made = log.create()
  await repo.commit(made.events, made.record)
  const events = []
  let record = made.record
  while (events.length <= JOURNAL_ROW_SPAN + 20) {
    const x = log.turn(`turn ${events.length}`)
    events.push(...x.events)
    record = x.record
  }
  await repo.commit(events, record) // one statement, one transaction
  await repo.close()

  const h = await startBurrow({ BURROW_SESSION_STORE: 'postgres', BURROW_DATABASE_URL: db.url, BURROW_MEMORY_STORE: 'off' })
  t.teardown(() => h.close())
  const lastSeq = record.last_seq
  const read = async (after: string): Promise<SseFrame[]> => {
    const s = await h.api.sse(`/v1/events?after=${after}`)
    const frames = await s.until((f) => f.data?.seq === lastSeq)
    s.close()
    return frames
  }
  const all = await read('0')
  t.same(
    all.map((f) => f.data.seq),
    Array.from({ length: lastSeq }, (_, i) => i + 1),
    'every event once, in order',
  )
  const big = all.filter((f) => f.data.seq > made.events.length)
  const base = Number(big[0]!.id)
  t.same(
    big.slice(0, JOURNAL_ROW_SPAN - 1).map((f) => Number(f.id)),
    Array.from({ length: JOURNAL_ROW_SPAN - 1 }, (_, i) => base + i),
    'ids count up to the span',
  )
  t.ok(
    big.slice(JOURNAL_ROW_SPAN - 1, -1).every((f) => f.id === undefined),
    'the tail carries none',
  )
  t.equal(Number(big.at(-1)!.id), base + JOURNAL_ROW_SPAN - 1, 'but its last event carries the last one')
  const resumed = await read(String(base + JOURNAL_ROW_SPAN - 3))
  t.same(
    resumed.map((f) => f.data.seq),
    big.slice(JOURNAL_ROW_SPAN - 2).map((f) => f.data.seq),
    'a resume inside the row: from the next id on, the tail whole — no gap',
  )
})
