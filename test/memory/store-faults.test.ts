// The HNSW memory store's own guarantees on a real full disk and with a damaged index
// directory: failed writes are STORE_UNAVAILABLE (never a hang, never an unhandled
// rejection of ours), reads go on, health follows the writes, nothing half-written stays.
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { scriptArgs } from '../helpers/burrow-bin.js'
import { hasPrlimit } from '../helpers/full-disk.js'

t.test('a full disk: writes fail cleanly and the store recovers without reopening', { skip: !hasPrlimit && 'needs prlimit' }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'burrow-store-full-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const fixture = new URL('./fixtures/store-on-full-disk.ts', import.meta.url).pathname
  // A bare node (tap's loader in NODE_OPTIONS would re-raise SIGXFSZ, see bare-server.ts);
  // warnings for lmdb-js's internal rejection, which the fixture reports one by one.
  const out = execFileSync('env', ['-u', 'NODE_OPTIONS', process.execPath, '--unhandled-rejections=warn', ...scriptArgs(fixture, [dir])], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
    timeout: 120_000,
  })
  const r = JSON.parse(out.trim().split('\n').at(-1)!)
  t.equal(r.before.ok, true)
  t.equal(r.healthyBefore, true)
  t.match(r.full.at(-1), { ok: false, code: 'STORE_UNAVAILABLE' }, 'an add fails with STORE_UNAVAILABLE (and settles)')
  t.equal(r.healthyWhileFull, false, 'unhealthy after a failed write')
  t.match(r.deleteWhileFull, { ok: false, code: 'STORE_UNAVAILABLE' }, 'deleteSession too')
  t.same(r.searchWhileFull, { ok: true, value: 1 }, 'searches work on a full disk')
  t.equal(r.countWhileFull, 2 + 10 * (r.full.length - 1), 'nothing of the failed writes counts')
  t.equal(r.healthyAfterProbe, true, 'healthy again once a probe write succeeds, without any other write')
  t.equal(r.after.ok, true, 'adds work again without reopening')
  t.same(r.deleteAfter, { ok: true, value: 1 + 10 * (r.full.length - 1) }, 'and deletes')
  t.same(r.closed, { ok: true })
  t.same(r.reopened, { count: 2, ack: 1, ackDeleted: 0, after: 1, full: 0 }, 'after reopening: everything acknowledged, nothing refused')
  t.ok(r.unhandled.length >= 1, 'lmdb-js did reject its internal promise')
  t.same(
    r.unhandled.filter((u: any) => u.ours || u.message !== 'Commit failed (see commitError for details)'),
    [],
    'and nothing of ours went unhandled',
  )
})
