// Group commit on PostgreSQL: the commits of many sessions go as one statement, and what each
// session gets is what it would get alone — its own events stored, its own refusal, its own rows
// of the tenant journal (which share the transaction's span of stream ids without overlapping).
// Leases taken and released at once in batches; a commit under a lease the database no longer
// holds for this replica is refused. A database of its own per test.
import t from 'tap'
import pg from 'pg'
import { BurrowError } from '../../src/core/errors.js'
import { JOURNAL_ROW_SPAN, streamPosition, type JournalRow } from '../../src/core/stores.js'
import { PgSessionRepository } from '../../src/store/pg-session-repository.js'
import { SessionLog, config, sessionId } from '../contract/fixtures.js'
import { tempDatabase } from '../helpers/pg.js'
import type { SessionLease } from '../../src/core/stores.js'

async function setup(t: Parameters<typeof tempDatabase>[0], replicaId = 'batches') {
  const db = await tempDatabase(t, 'pgbatch')
  const repo = await PgSessionRepository.open({ url: db.url, poolSize: 4, replicaId, idempotencyTtlMs: 3_600_000 })
  const direct = new pg.Pool({ connectionString: db.url, max: 1 })
  // The database's drop at teardown may end this pool's idle connection first.
  direct.on('error', () => undefined)
  t!.teardown(async () => {
    await repo.close()
    await direct.end()
  })
  return { db, repo, direct }
}

/** Every readable journal row of the tenant, page by page, as a reader resumes. */
async function journal(repo: PgSessionRepository, tenant: string): Promise<JournalRow[]> {
  const out: JournalRow[] = []
  let after = -1
  for (;;) {
    const page = await repo.journal.rowsAfter(tenant, after, 7)
    out.push(...page.rows)
    if (page.rows.length === 0) return out
    const last = page.rows.at(-1)!
    after = streamPosition(last, last.last).pos
  }
}

t.test('many sessions committed at once: one statement for several, each log whole, the journal without overlap', async (t) => {
  const { repo, direct } = await setup(t)
  const logs = Array.from({ length: 40 }, (_, i) => new SessionLog(sessionId(100 + i), config(i % 3 === 0 ? 'tenant-b' : 'tenant-a')))
  for (const log of logs) {
    const c = log.create()
    await repo.commit(c.events, c.record)
  }
  // Five rounds of turns, every session's commit made in the same tick: they queue behind the batches in flight.
  for (let round = 0; round < 5; round++) {
    await Promise.all(
      logs.map((log) => {
        const c = log.turn(`round ${round}`)
        return repo.commit(c.events, c.record)
      }),
    )
  }
  for (const log of logs) {
    t.same(await repo.events.readAfter(log.id, 0), log.events, `${log.id}: its log as committed`)
    t.same(await repo.sessions.get(log.id), log.record, `${log.id}: its snapshot`)
  }
  const tx = await direct.query('SELECT count(*)::int AS rows, count(DISTINCT xid)::int AS transactions FROM tenant_log')
  t.ok(tx.rows[0].transactions < tx.rows[0].rows / 2, `commits shared transactions (${tx.rows[0].rows} rows in ${tx.rows[0].transactions})`)

  for (const tenant of ['tenant-a', 'tenant-b']) {
    const rows = await journal(repo, tenant)
    const mine = logs.filter((l) => l.cfg.tenant === tenant)
    // Every event of the tenant's sessions appears once, in seq order per session, at a stream id of its own.
    const seen = new Map<string, number>()
    const ids = new Set<number>()
    let prev = -1
    for (const row of rows) {
      t.equal(row.first, (seen.get(row.sessionId) ?? 0) + 1, 'a row follows the one before it of its session')
      seen.set(row.sessionId, row.last)
      for (let seq = row.first; seq <= row.last; seq++) {
        const { pos, shown } = streamPosition(row, seq)
        if (!shown) continue
        t.ok(pos > prev && !ids.has(pos), 'stream ids only grow')
        ids.add(pos)
        prev = pos
      }
      t.ok(
        (row.span ?? JOURNAL_ROW_SPAN) <= JOURNAL_ROW_SPAN &&
          row.base % JOURNAL_ROW_SPAN === JOURNAL_ROW_SPAN - (row.span ?? JOURNAL_ROW_SPAN),
      )
    }
    t.same(
      [...seen].sort(),
      mine.map((l) => [l.id, l.record!.last_seq]).sort(),
      `${tenant}: the journal holds every commit of its sessions, and only theirs`,
    )
  }
})

t.test('a refused session in a batch: refused alone, with what queued behind it; the others of the batch are written', async (t) => {
  const { repo, direct } = await setup(t)
  const logs = Array.from({ length: 6 }, (_, i) => new SessionLog(sessionId(200 + i)))
  for (const log of logs) {
    const c = log.create()
    await repo.commit(c.events, c.record)
  }
  const [busyA, busyB, ...rest] = logs as [SessionLog, SessionLog, ...SessionLog[]]
  const victim = rest[0]!
  // Another replica took the victim over (a newer token on its row).
  await direct.query('UPDATE sessions SET fence = 9 WHERE session_id = $1', [victim.id])
  // Two commits take the two flights; the rest queue and go as one batch, the victim among them.
  const first = [busyA, busyB].map((l) => {
    const c = l.turn('first')
    return repo.commit(c.events, c.record)
  })
  const batch = rest.map((l) => {
    const c = l.turn('batched')
    return repo.commit(c.events, c.record)
  })
  const behind = victim.turn('queued behind the victim')
  const queued = repo.commit(behind.events, behind.record).then(
    () => null,
    (e: unknown) => e,
  )
  const settled = Promise.allSettled(batch)
  await Promise.all(first)
  const outcomes = await settled
  t.match(
    outcomes[0],
    { status: 'rejected', reason: { code: 'STORE_UNAVAILABLE', data: { reason: 'lease_lost' } } },
    'the victim: taken over',
  )
  t.same(
    outcomes.slice(1).map((o) => o.status),
    rest.slice(1).map(() => 'fulfilled'),
    'the others of its batch: written',
  )
  const err = await queued
  t.ok(err instanceof BurrowError && err.data?.reason === 'lease_lost', 'the commit queued behind it: refused for the same reason')
  t.equal(await repo.events.lastSeq(victim.id), 1, 'nothing of the victim stored past its creation')
  for (const l of [busyA, busyB, ...rest.slice(1)]) t.same(await repo.events.readAfter(l.id, 0), l.events, `${l.id}: stored`)
  const tx = await direct.query('SELECT count(DISTINCT xid)::int AS n FROM tenant_log WHERE session_id = ANY($1) AND first = 2', [
    rest.slice(1).map((l) => l.id),
  ])
  t.equal(tx.rows[0].n, 1, 'they were written in one transaction: the batch the victim was refused from')
  t.ok(repo.writable(), 'a refusal is not an outage')
})

t.test('leases taken at once: each its own token; one held elsewhere answers nothing, the others are taken', async (t) => {
  const { db, repo } = await setup(t, 'replica-a')
  const other = await PgSessionRepository.open({ url: db.url, poolSize: 2, replicaId: 'replica-b', idempotencyTtlMs: 3_600_000 })
  t.teardown(() => other.close())
  const logs = Array.from({ length: 12 }, (_, i) => new SessionLog(sessionId(300 + i)))
  for (const log of logs) {
    const c = log.create()
    await repo.commit(c.events, c.record)
  }
  const tenant = config().tenant
  const held = (await other.leases.acquire(logs[3]!.id, tenant)) as SessionLease
  t.equal(held.token, 1)
  const got = await Promise.all(logs.map((l) => repo.leases.acquire(l.id, tenant)))
  t.same(got[3], { held: true, running: false }, 'held by the other replica: not taken')
  const leases = got.map((l) => (l && !('held' in l) ? l : undefined))
  t.same(
    leases.filter((_, i) => i !== 3).map((l) => l && { token: l.token, lastSeq: l.lastSeq, previousOwner: l.previousOwner }),
    logs.filter((_, i) => i !== 3).map(() => ({ token: 1, lastSeq: 1, previousOwner: null })),
    'the others: taken, with the stored last seq',
  )
  // Each commits under its own lease, all at once.
  await Promise.all(
    logs.map((l, i) => {
      if (i === 3) return undefined
      const c = l.turn('under my lease')
      return repo.commit(c.events, c.record, leases[i]!.token)
    }),
  )
  await Promise.all(leases.map((l) => l?.release()))
  const again = await Promise.all(logs.map((l) => other.leases.acquire(l.id, tenant)))
  t.same(
    again.map((l) => (l as SessionLease).token),
    logs.map((_, i) => (i === 3 ? 2 : 2)),
    'released at once: the other replica takes them all with the next token (its own too)',
  )
})

t.test('a commit under a lease the database no longer holds for this replica is refused: lease_lost', async (t) => {
  const { repo, direct } = await setup(t, 'replica-a')
  const log = new SessionLog(sessionId(400))
  const c = log.create()
  await repo.commit(c.events, c.record)
  const lease = (await repo.leases.acquire(log.id, config().tenant)) as SessionLease
  const one = log.turn('under the lease')
  await repo.commit(one.events, one.record, lease.token)
  // A database that crashed before flushing a lease forgot it: here it gave the same token to another replica.
  await direct.query("UPDATE leases SET owner = 'replica-b' WHERE session_id = $1", [log.id])
  const two = log.turn('after the lease was forgotten')
  const err = await repo.commit(two.events, two.record, lease.token).then(
    () => null,
    (e: unknown) => e,
  )
  t.match(err, { code: 'STORE_UNAVAILABLE', data: { reason: 'lease_lost' } }, 'refused as taken over')
  // Or it forgot the lease altogether: the row holds the token before it.
  await direct.query("UPDATE leases SET owner = 'replica-a', token = token - 1 WHERE session_id = $1", [log.id])
  const err2 = await repo.commit(two.events, two.record, lease.token).then(
    () => null,
    (e: unknown) => e,
  )
  t.match(err2, { code: 'STORE_UNAVAILABLE', data: { reason: 'lease_lost' } }, 'refused too')
  t.equal(await repo.events.lastSeq(log.id), one.record.last_seq, 'nothing stored past the commit under the lease')
})
