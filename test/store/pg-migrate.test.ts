// Schema migrations on PostgreSQL: a fresh database, a re-run, replicas starting together, a
// failing migration, and a database newer than the code. Each test on a database of its own.
import t from 'tap'
import pg from 'pg'
import { migrate, MIGRATION_LOCK, SchemaTooNewError } from '../../src/store/pg-migrate.js'
import { MIGRATIONS, SCHEMA_VERSION, type Migration } from '../../src/store/pg-schema.js'

/** Every version this code applies, in order. */
const ALL = MIGRATIONS.map((m) => m.version)
import { tempDatabase } from '../helpers/pg.js'

function pool(t: Parameters<typeof tempDatabase>[0], url: string): pg.Pool {
  const p = new pg.Pool({ connectionString: url, max: 2 })
  p.on('error', () => undefined)
  t!.teardown(() => p.end())
  return p
}

const versions = async (p: pg.Pool) => (await p.query('SELECT version FROM schema_version ORDER BY version')).rows.map((r) => r.version)
const tables = async (p: pg.Pool) =>
  (await p.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1")).rows.map((r) => r.table_name)

t.test('a fresh database gets every table, and every key but schema_version leads with the tenant', async (t) => {
  const db = await tempDatabase(t, 'migrate')
  const p = pool(t, db.url)
  t.same(await migrate(p), { from: 0, to: SCHEMA_VERSION, applied: ALL })
  t.same(await tables(p), [
    'events',
    'idempotency',
    'leases',
    'memory_deleted_sessions',
    'memory_deletions',
    'memory_entries',
    'memory_postings',
    'memory_tenants',
    'projections',
    'schema_version',
    'session_usage',
    'sessions',
    'tenant_log',
    'tenant_log_pruned',
  ])
  t.same(await versions(p), ALL)
  const keys = await p.query(`
    SELECT c.relname AS table, a.attname AS first FROM pg_index i
    JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0]
    WHERE i.indisprimary AND n.nspname = 'public' ORDER BY 1`)
  for (const row of keys.rows) {
    if (row.table === 'schema_version') continue
    t.equal(row.first, 'tenant', `${row.table}'s primary key leads with tenant`)
  }
  t.equal(keys.rows.length, 14, 'every table has a primary key')
  const lease = await p.query(
    "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'leases' ORDER BY ordinal_position",
  )
  t.same(
    lease.rows.map((r) => `${r.column_name} ${r.data_type}`),
    ['tenant text', 'session_id text', 'owner text', 'token bigint', 'expires_at timestamp with time zone'],
  )
})

t.test('a re-run applies nothing and changes nothing', async (t) => {
  const db = await tempDatabase(t, 'migrate')
  const p = pool(t, db.url)
  await migrate(p)
  await p.query("INSERT INTO leases VALUES ('t', 's', 'r1', 7, now())")
  t.same(await migrate(p), { from: SCHEMA_VERSION, to: SCHEMA_VERSION, applied: [] })
  t.same(await versions(p), ALL)
  t.equal((await p.query('SELECT count(*)::int AS n FROM leases')).rows[0].n, 1, 'data kept')
})

t.test('replicas starting together: the lock lets exactly one apply each version', async (t) => {
  const db = await tempDatabase(t, 'migrate')
  // Slow migrations widen the window in which unlocked migrators would collide (duplicate table, duplicate version).
  const slow: Migration[] = [
    { version: 1, description: 'one', sql: 'SELECT pg_sleep(0.2); CREATE TABLE a (tenant text, PRIMARY KEY (tenant))' },
    { version: 2, description: 'two', sql: 'SELECT pg_sleep(0.2); CREATE TABLE b (tenant text, PRIMARY KEY (tenant))' },
  ]
  const pools = [0, 1, 2, 3].map(() => pool(t, db.url))
  const results = await Promise.all(pools.map((p) => migrate(p, slow)))
  t.same(
    results.map((r) => r.applied).sort((a, b) => b.length - a.length),
    [[1, 2], [], [], []],
    'one migrator applied both versions; the others found them applied',
  )
  t.same(await versions(pools[0]!), [1, 2])
  // The real schema, from two pools at once.
  const real = await tempDatabase(t, 'migrate')
  const [a, b] = [pool(t, real.url), pool(t, real.url)]
  const both = await Promise.all([migrate(a), migrate(b)])
  t.same(both.map((r) => r.applied.length).sort(), [0, ALL.length])
  t.same(await versions(a), ALL)
})

t.test('a version-2 database gains the idempotency claim columns, its records kept', async (t) => {
  const db = await tempDatabase(t, 'migrate')
  const p = pool(t, db.url)
  await migrate(p, MIGRATIONS.slice(0, 2))
  await p.query(`INSERT INTO idempotency VALUES ('t', 's', 'k', 1, '{"fingerprint":"f"}')`)
  t.same(await migrate(p), { from: 2, to: SCHEMA_VERSION, applied: ALL.slice(2) })
  t.same((await p.query('SELECT key, owner, pending_until FROM idempotency')).rows, [{ key: 'k', owner: null, pending_until: null }])
})

t.test(
  'a version-4 database gains the deletion times and the pruned counter, its deletions kept and timed from the migration',
  async (t) => {
    const db = await tempDatabase(t, 'migrate')
    const p = pool(t, db.url)
    await migrate(p, MIGRATIONS.slice(0, 4))
    await p.query(`INSERT INTO memory_tenants (tenant, next, deletions) VALUES ('t', 3, 2)`)
    await p.query(`INSERT INTO memory_deletions VALUES ('t', 1, 0), ('t', 2, 2)`)
    const before = (await p.query('SELECT now() AS at')).rows[0].at as Date
    t.same(await migrate(p), { from: 4, to: SCHEMA_VERSION, applied: ALL.slice(4) })
    const kept = (await p.query('SELECT seq, label, at FROM memory_deletions ORDER BY seq')).rows
    t.same(
      kept.map((r) => [Number(r.seq), Number(r.label)]),
      [
        [1, 0],
        [2, 2],
      ],
    )
    for (const r of kept) t.ok((r.at as Date).getTime() >= before.getTime(), 'a deletion already recorded counts from the migration')
    t.same((await p.query('SELECT tenant, deletions, pruned FROM memory_tenants')).rows, [{ tenant: 't', deletions: '2', pruned: '0' }])
    const ix = await p.query("SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_deletions_by_age'")
    t.match(ix.rows[0]?.indexdef, /ON public\.memory_deletions USING btree \(at\)/, 'old deletions are found by their index')
  },
)

t.test('a version-7 database: its tenant journal rows keep their stream ids (start 0), and a transaction may hold several', async (t) => {
  const db = await tempDatabase(t, 'migrate')
  const p = pool(t, db.url)
  await migrate(p, MIGRATIONS.slice(0, 7))
  await p.query(`INSERT INTO tenant_log VALUES ('t', '41', 's1', 1, 3), ('t', '42', 's2', 1, 1)`)
  t.same(await migrate(p), { from: 7, to: SCHEMA_VERSION, applied: ALL.slice(7) })
  const rows = (await p.query('SELECT xid::text, start, session_id FROM tenant_log ORDER BY xid')).rows
  t.same(rows, [
    { xid: '41', start: 0, session_id: 's1' },
    { xid: '42', start: 0, session_id: 's2' },
  ])
  await p.query(`INSERT INTO tenant_log (tenant, xid, start, session_id, first, last) VALUES ('t', '42', 1, 's3', 1, 2)`)
  await t.rejects(
    p.query(`INSERT INTO tenant_log (tenant, xid, start, session_id, first, last) VALUES ('t', '42', 1, 's4', 1, 1)`),
    { code: '23505' },
    'one row per start of a transaction',
  )
})

t.test('a migration that fails applies nothing of the run, and releases the lock', async (t) => {
  const db = await tempDatabase(t, 'migrate')
  const p = pool(t, db.url)
  const bad: Migration[] = [
    { version: 1, description: 'fine', sql: 'CREATE TABLE a (tenant text PRIMARY KEY)' },
    { version: 2, description: 'broken', sql: 'CREATE TABLE a (tenant text PRIMARY KEY)' },
  ]
  await t.rejects(migrate(p, bad), /already exists/)
  t.same(await tables(p), [], 'not even schema_version is left')
  const locked = await p.query('SELECT pg_try_advisory_lock($1) AS ok', [MIGRATION_LOCK])
  t.equal(locked.rows[0].ok, true, 'the lock is free again')
  await p.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK])
})

t.test('a database newer than the code is refused, untouched', async (t) => {
  const db = await tempDatabase(t, 'migrate')
  const p = pool(t, db.url)
  await migrate(p)
  await p.query("INSERT INTO schema_version (version, description) VALUES ($1, 'from the future')", [SCHEMA_VERSION + 1])
  const err = await migrate(p).catch((e: unknown) => e)
  t.type(err, SchemaTooNewError)
  t.equal((err as SchemaTooNewError).found, SCHEMA_VERSION + 1)
  t.equal((err as SchemaTooNewError).known, SCHEMA_VERSION)
  t.same(await versions(p), [...ALL, SCHEMA_VERSION + 1])
})
