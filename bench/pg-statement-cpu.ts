/**
 * PostgreSQL's own CPU per statement of a turn, for docs/scaling.md: the real store
 * (PgSessionRepository) on a database of its own with a pool of one connection, so every statement
 * runs in one backend whose CPU time is read from /proc before and after N runs of each kind. The
 * turn's statements as the store makes them (its start committed, its answer committed, the lease
 * taken and released, a change-feed NOTIFY), and `SELECT 1` for the floor of a round trip. Not a
 * timed benchmark (bench/run.ts does not run it; Linux only):
 *
 *   npx tsx bench/pg-statement-cpu.ts [N=1000]
 */
import { readFileSync } from 'node:fs'
import type { EventData } from '../src/core/events.js'
import { PgSessionRepository } from '../src/store/pg-session-repository.js'
import { SessionLog, sessionId } from '../test/contract/fixtures.js'
import { tempDatabase } from '../test/helpers/pg.js'
import type { SessionLease } from '../src/core/stores.js'

const N = Number(process.argv[2] ?? 1000)
const SESSIONS = 100
const db = await tempDatabase(undefined, 'stmtcpu')
const repo = await PgSessionRepository.open({ url: db.url, poolSize: 1, replicaId: 'cpu', idempotencyTtlMs: 3_600_000 })
try {
  const pool = (repo as unknown as { pool: import('pg').Pool }).pool
  const pid = (await pool.query('SELECT pg_backend_pid() AS p')).rows[0].p as number
  /** The backend's user + system CPU in µs (clock ticks of 10 ms: N must be large enough). */
  const cpu = () => {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
    return (Number(f[11]) + Number(f[12])) * 10_000
  }
  const logs = Array.from({ length: SESSIONS }, (_, i) => new SessionLog(sessionId(i + 1)))
  for (const l of logs) {
    const c = l.create()
    await repo.commit(c.events, c.record)
  }
  const rows: Array<{ statement: string; backend_cpu_us: number; wall_us: number }> = []
  const measure = async (statement: string, op: (i: number) => Promise<unknown>) => {
    const c0 = cpu()
    const t0 = performance.now()
    for (let i = 0; i < N; i++) await op(i)
    rows.push({
      statement,
      backend_cpu_us: Math.round((cpu() - c0) / N),
      wall_us: Math.round(((performance.now() - t0) * 1000) / N),
    })
  }
  await measure("a turn's start committed (turn_started)", async (i) => {
    const c = logs[i % SESSIONS]!.startTurn(`question ${i}`)
    await repo.commit(c.events, c.record)
  })
  await measure('its answer committed (assistant_message, turn_completed)', async (i) => {
    const l = logs[i % SESSIONS]!
    const text = `echo: question ${i}`
    const usage = { input_tokens: 10, output_tokens: 3 }
    const answer: EventData['assistant_message'] = {
      message: { role: 'assistant', content: [{ type: 'text', text }] },
      usage,
      stop_reason: 'end_turn',
      model: 'offline:echo',
      step: 1,
      client_tool_call_ids: [],
    }
    const done: EventData['turn_completed'] = { output_text: text, usage, stop_reason: 'end_turn' }
    const c = l.add(l.record!.turn_count, { type: 'assistant_message', data: answer }, { type: 'turn_completed', data: done })
    await repo.commit(c.events, c.record)
  })
  // The lease: taken (over this owner's own, which runs the same statement as over an expired one), then
  // taken and released; the release's cost is the difference.
  for (const l of logs) await repo.leases.acquire(l.id, l.cfg.tenant)
  await measure('the lease taken', (i) => repo.leases.acquire(logs[i % SESSIONS]!.id, 'tenant-a'))
  await measure('the lease taken and released', async (i) => {
    const lease = await repo.leases.acquire(logs[i % SESSIONS]!.id, 'tenant-a')
    await (lease as SessionLease).release()
  })
  const both = rows.pop()!
  const take = rows.at(-1)!
  rows.push({
    statement: 'the lease released',
    backend_cpu_us: both.backend_cpu_us - take.backend_cpu_us,
    wall_us: both.wall_us - take.wall_us,
  })
  await measure('a change-feed NOTIFY', (i) =>
    pool.query("SELECT pg_notify('burrow_bench', $1)", [`{"t":"tenant-a","s":"x","f":${i},"l":${i}}`]),
  )
  await measure('SELECT 1', () => pool.query({ name: 'one', text: 'SELECT 1' }))
  console.table(rows)
  console.log(JSON.stringify({ n: N, rows }))
} finally {
  await repo.close()
  await db.drop()
}
