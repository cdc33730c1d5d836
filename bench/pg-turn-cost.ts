/**
 * The database cost of a turn on PostgreSQL, for docs/scaling.md: a real server on a database of
 * its own, reached through a TCP proxy that counts bytes and statements (the client's simple
 * queries and extended-protocol syncs), and the database's own counters from pg_stat_database. Not a timed benchmark (bench/run.ts does not run it):
 *
 *   npx tsx bench/pg-turn-cost.ts [turns]
 */
import { createServer, connect, type AddressInfo, type Socket } from 'node:net'
import { spawnServer, stopServer } from '../test/helpers/child-server.js'
import { Api, sleep } from '../test/helpers/harness.js'
import { adminQuery, tempDatabase } from '../test/helpers/pg.js'

const TURNS = Number(process.argv[2] ?? 100)
const bytes = { up: 0, down: 0, statements: 0 }

/** Counts the statements a client sends: simple queries ('Q') and extended-protocol syncs ('S', one per query). */
function statementCounter(): (d: Buffer) => void {
  let buf = Buffer.alloc(0)
  let startup = true
  return (d) => {
    buf = Buffer.concat([buf, d])
    for (;;) {
      if (startup) {
        if (buf.length < 4) return
        const len = buf.readInt32BE(0)
        if (buf.length < len) return
        buf = buf.subarray(len)
        startup = false
        continue
      }
      if (buf.length < 5) return
      const len = buf.readInt32BE(1)
      if (buf.length < len + 1) return
      const type = String.fromCharCode(buf[0]!)
      if (type === 'Q' || type === 'S') bytes.statements++
      buf = buf.subarray(len + 1)
    }
  }
}

const proxy = createServer((client: Socket) => {
  const upstream = connect(5432, '127.0.0.1')
  const count = statementCounter()
  client.on('data', (d) => {
    bytes.up += d.length
    count(d)
  })
  upstream.on('data', (d) => (bytes.down += d.length))
  for (const s of [client, upstream]) s.on('error', () => undefined)
  client.pipe(upstream)
  upstream.pipe(client)
  client.on('close', () => upstream.destroy())
  upstream.on('close', () => client.destroy())
})
await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r))
const port = (proxy.address() as AddressInfo).port
const db = await tempDatabase(undefined, 'turncost')
const url = new URL(db.url)
url.port = String(port)
const server = await spawnServer({
  BURROW_SESSION_STORE: 'postgres',
  BURROW_DATABASE_URL: url.href,
  BURROW_MEMORY_STORE: 'off',
  BURROW_COMPACTION: 'off',
  BURROW_DATA_DIR: `/tmp/burrow-turncost-${process.pid}`,
  BURROW_LEASE_MS: '600000', // no recovery sweep during the run
  BURROW_REPLICA_ID: 'cost',
})
const api = new Api(server.url)

async function stats() {
  await sleep(2500) // backends report their counters when idle for a second
  const r = await adminQuery(
    'SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted, tup_returned, tup_fetched FROM pg_stat_database WHERE datname = $1',
    [db.name],
  )
  return {
    ...Object.fromEntries(Object.entries(r.rows[0]).map(([k, v]) => [k, Number(v)])),
    up: bytes.up,
    down: bytes.down,
    statements: bytes.statements,
  }
}

async function measure(name: string, run: (i: number) => Promise<void>) {
  const before = await stats()
  for (let i = 0; i < TURNS; i++) await run(i)
  const after = await stats()
  const per = (k: keyof typeof before) => ((after[k] - before[k]) / TURNS).toFixed(2)
  console.log(
    JSON.stringify({
      case: name,
      turns: TURNS,
      statements: per('statements'),
      bytes_to_db: per('up'),
      bytes_from_db: per('down'),
    }),
  )
}

try {
  const id = await api.createSession({ system_prompt: 'You are terse.' })
  for (let i = 0; i < 5; i++) await api.turn(id, { input: `warm-up ${i}` })
  await measure('turn (offline:echo, JSON answer)', async (i) => {
    const r = await api.turn(id, { input: `turn ${i}: a short question` })
    if (r.status !== 200) throw new Error(JSON.stringify(r.body))
  })
  await measure('turn with an Idempotency-Key', async (i) => {
    const r = await api.turn(id, { input: `keyed ${i}` }, { headers: { 'idempotency-key': `k-${i}` } })
    if (r.status !== 200) throw new Error(JSON.stringify(r.body))
  })
  await measure('retry of a completed key (replayed, no model call)', async (i) => {
    const r = await api.turn(id, { input: `keyed ${i}` }, { headers: { 'idempotency-key': `k-${i}` } })
    if (r.status !== 200) throw new Error(JSON.stringify(r.body))
  })
  const history = (await api.get(`/v1/sessions/${id}`)).body
  console.log(JSON.stringify({ history_messages: history.messages.length, last_seq: history.last_seq }))
} finally {
  await stopServer(server)
  proxy.close()
  await db.drop()
}
