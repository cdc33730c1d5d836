// A version-3 database (each session's whole record in `sessions.record`) upgraded to the snapshot
// split of version 4: every session reads back equal to the record it held, text exactly, and
// takes further commits — appends, a compaction, usage past a chunk boundary — that read back equal
// too, also after reopening. A database of its own.
import t from 'tap'
import pg from 'pg'
import type { SessionRecord } from '../../src/core/session-record.js'
import { rebuild } from '../../src/session/session-reducer.js'
import { migrate } from '../../src/store/pg-migrate.js'
import { MIGRATIONS, SCHEMA_VERSION } from '../../src/store/pg-schema.js'
import { PgSessionRepository } from '../../src/store/pg-session-repository.js'
import { SessionLog, config, sessionId } from '../contract/fixtures.js'
import { tempDatabase } from '../helpers/pg.js'

/** Writes `log` as the version-3 store did: its events, and the whole record in one row. */
async function insertV3(p: pg.Pool, log: SessionLog): Promise<void> {
  const r = log.record!
  for (const e of log.events)
    await p.query('INSERT INTO events (tenant, session_id, seq, turn, type, at, data) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
      r.config.tenant,
      log.id,
      e.seq,
      e.turn,
      e.type,
      e.at,
      JSON.stringify(e.data),
    ])
  await p.query(
    `INSERT INTO sessions (tenant, session_id, status, created_at, updated_at, model, metadata, turn_count, last_seq, running, fence, record)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 0, $11)`,
    [
      r.config.tenant,
      log.id,
      r.status,
      r.created_at,
      r.updated_at,
      r.config.model,
      JSON.stringify(r.config.metadata),
      r.turn_count,
      r.last_seq,
      r.open_turn?.state === 'running',
      JSON.stringify(r),
    ],
  )
}

function compaction(log: SessionLog): ReturnType<SessionLog['add']> {
  const r = log.record!
  return log.add(r.turn_count, {
    type: 'compaction_completed',
    data: {
      summary_tokens: 1,
      messages_before: r.messages.length,
      messages_after: 3,
      summary: 'what came before',
      discarded_seq_range: [2, r.message_seqs[r.messages.length - 3]!],
    },
  })
}

t.test('sessions of a version-3 database read back equal after the upgrade, and go on', async (t) => {
  const db = await tempDatabase(t, 'pgupgrade')
  const p = new pg.Pool({ connectionString: db.url, max: 2 })
  p.on('error', () => undefined)
  t.teardown(() => p.end())
  await migrate(p, MIGRATIONS.slice(0, 3))

  // Long (usage over three chunks), compacted, with notes and a NUL in its text; paused; just created.
  const long = new SessionLog(sessionId(1), config('tenant-a', { metadata: { k: 'v' } }))
  long.create()
  for (let i = 1; i <= 20; i++) long.turn(`turn ${i}`)
  compaction(long)
  long.add(long.record!.turn_count, { type: 'note_set', data: { key: 'k', value: 'v', by: 'client' } })
  for (let i = 21; i <= 40; i++) long.turn(i === 30 ? 'nul \u0000 here' : `turn ${i}`)
  const paused = new SessionLog(sessionId(2), config('tenant-b'))
  paused.create()
  paused.turn('one')
  paused.pausedTurn('two')
  const fresh = new SessionLog(sessionId(3))
  fresh.create()
  const logs = [long, paused, fresh]
  for (const log of logs) await insertV3(p, log)
  const before = logs.map((l) => structuredClone(l.record!))

  t.same(await migrate(p), { from: 3, to: SCHEMA_VERSION, applied: MIGRATIONS.slice(3).map((m) => m.version) })
  const cols = await p.query("SELECT column_name FROM information_schema.columns WHERE table_name = 'sessions' AND column_name = 'record'")
  t.equal(cols.rows.length, 0, 'the whole-record column is gone')

  let repo = await PgSessionRepository.open({ url: db.url, poolSize: 2, replicaId: 'test', idempotencyTtlMs: 3_600_000 })
  t.teardown(() => repo.close())
  for (const [i, log] of logs.entries()) {
    const got = await repo.sessions.get(log.id)
    t.same(got, before[i], `${log.id.slice(-4)} reads back equal after the upgrade`)
    t.same(rebuild(await repo.events.readAfter(log.id, 0)), got, 'rebuild(log) == snapshot')
  }
  t.equal(
    (await repo.sessions.get(long.id))!.messages.some((m) => JSON.stringify(m).includes('\\u0000')),
    true,
    'the NUL is kept',
  )

  // Further commits on the upgraded rows: appends across a usage chunk boundary, a compaction, a paused turn answered.
  const check = async (log: SessionLog, what: string) => t.same(await repo.sessions.get(log.id), log.record, what)
  for (let i = 41; i <= 52; i++) await commit(repo, long.turn(`turn ${i}`))
  await check(long, 'appends after the upgrade')
  await commit(repo, compaction(long))
  await commit(repo, long.turn('after the second compaction'))
  await check(long, 'a compaction after the upgrade')
  const id = `call_${paused.record!.turn_count}`
  await commit(
    repo,
    paused.add(paused.record!.turn_count, {
      type: 'tool_result',
      data: { tool_call_id: id, name: 'lookup', content: 'found', is_error: false },
    }),
  )
  await check(paused, 'the paused turn answered')
  await commit(repo, fresh.turn('first'))
  await check(fresh, 'a first turn')

  await repo.close()
  repo = await PgSessionRepository.open({ url: db.url, poolSize: 2, replicaId: 'test', idempotencyTtlMs: 3_600_000 })
  for (const log of logs) await check(log, `${log.id.slice(-4)} after reopening`)
  const usage = await p.query('SELECT chunk FROM session_usage WHERE session_id = $1 ORDER BY chunk', [long.id])
  t.same(
    usage.rows.map((r) => r.chunk),
    [0, 1, 2],
    'turn usage in chunks of 16 turns, the last (turns 49–53) in the head',
  )
})

async function commit(repo: PgSessionRepository, c: { events: any[]; record: SessionRecord }): Promise<void> {
  await repo.commit(c.events, c.record)
}
