// The page walk of the pre-open check on a session store the real repository wrote: each kind of
// damage it must find, written at a known place, is refused with a message that says what; the
// healthy file is accepted, walked whole, or within a page budget with the largest databases
// checked at their root only. And what LMDB itself throws about a damaged file becomes the refusal.
import t from 'tap'
import { copyFile, mkdir, open, readFile, stat, writeFile } from 'node:fs/promises'
import { gunzipSync } from 'node:zlib'
import { join } from 'node:path'
import { checkLmdbFile } from '../../src/store/lmdb-preflight.js'
import { readDbRecord } from '../../src/store/lmdb-format.js'
import { findBrokenPage, type ValueChecks } from '../../src/store/lmdb-page-walk.js'
import { sessionStoreValues } from '../../src/store/lmdb-value-checks.js'
import { LmdbSessionRepository } from '../../src/store/lmdb-session-repository.js'
import { storeDamage } from '../../src/app/data-dir-check.js'
import { StartupError } from '../../src/app/startup-error.js'
import { config, SessionLog, sessionId } from '../contract/fixtures.js'
import { tempDir } from '../helpers/temp-dir.js'
import { lmdbTreePages } from '../helpers/lmdb-pages.js'

t.test('the page walk', async (t) => {
  const dir = await tempDir(t, 'page-walk')
  const repo = await LmdbSessionRepository.open(dir, { durability: 'fsync', idempotencyTtlMs: 3_600_000 })
  for (let i = 0; i < 120; i++) {
    const log = new SessionLog(sessionId(7000 + i), config())
    for (const c of [log.create(), log.turn(`question ${i} ${'y'.repeat(200 + i * 90)}`)]) await repo.commit(c.events, c.record)
  }
  await repo.close()
  const original = join(dir, 'lmdb', 'data.mdb')
  const healthy = await checkLmdbFile(original)
  if (healthy.state !== 'ok') return t.fail(`the healthy file is refused: ${JSON.stringify(healthy)}`)
  t.same(healthy.walked.rootOnly, [], 'a healthy file is walked whole')
  const { ps, tree } = lmdbTreePages(await readFile(original))
  const branch = tree.find((p) => p.kind === 'branch')!
  const overflowRef = tree.flatMap((p) => p.followed.filter(([a, b]) => b - a === 24).map(([a]) => p.pgno * ps + a))[0]!
  t.ok(branch && overflowRef, 'the store has a branch page and a value on overflow pages')

  async function damaged(write: (fh: import('node:fs/promises').FileHandle) => Promise<unknown>, values?: ValueChecks): Promise<string> {
    const file = join(await tempDir(t, 'page-walk'), 'data.mdb')
    await copyFile(original, file)
    const fh = await open(file, 'r+')
    try {
      await write(fh)
    } finally {
      await fh.close()
    }
    const c = await checkLmdbFile(file, values)
    return c.state === 'damaged' ? c.problem : `not refused: ${c.state}`
  }
  const u16 = (n: number) => Buffer.from(new Uint16Array([n]).buffer)
  const u64 = (n: bigint) => Buffer.from(new BigUint64Array([n]).buffer)
  const lastPage = healthy.lastPage
  const filePages = BigInt((await stat(original)).size / ps)

  t.test('a branch node that points past the snapshot (LMDB: MDB_PAGE_NOTFOUND)', async (t) => {
    const node = branch.followed.find(([a, b]) => b - a === 8 && a >= 24)![0]
    const pgno = lastPage + 7n
    const problem = await damaged((fh) =>
      fh.write(Buffer.concat([u16(Number(pgno & 0xffffn)), u16(Number(pgno >> 16n))]), 0, 4, branch.pgno * ps + node),
    )
    t.match(problem, /references page \d+, outside the snapshot's pages/)
  })
  t.test('a page holding another page number', async (t) => {
    t.match(await damaged((fh) => fh.write(u64(3n), 0, 8, branch.pgno * ps)), new RegExp(`page ${branch.pgno} of its .* holds page 3`))
  })
  t.test('lower above upper', async (t) => {
    t.match(
      await damaged((fh) => fh.write(Buffer.concat([u16(4000), u16(100)]), 0, 4, branch.pgno * ps + 20)),
      /bad bounds \(lower 4000, upper 100\)/,
    )
  })
  t.test('a node offset outside the nodes', async (t) => {
    t.match(await damaged((fh) => fh.write(u16(ps - 2), 0, 2, branch.pgno * ps + 24)), /has node 0 at \d+, outside its nodes/)
  })
  t.test('an overflow run past the end of the file (a SIGBUS when the value is read)', async (t) => {
    const problem = await damaged((fh) => fh.write(u64(filePages + 1000n), 0, 8, overflowRef + 16))
    t.match(problem, /references overflow page \d+ \(\d+ pages\), outside the snapshot's pages/)
  })
  t.test('an overflow reference to a page that is not the start of a run', async (t) => {
    t.match(await damaged((fh) => fh.write(u64(BigInt(branch.pgno)), 0, 8, overflowRef)), /overflow page|another reference/)
  })
  t.test('a tree page written after the snapshot (LMDB would write it in place)', async (t) => {
    t.match(await damaged((fh) => fh.write(u64(healthy.txnid + 1n), 0, 8, branch.pgno * ps + 8)), /after the snapshot's/)
  })
  t.test("a database's page counts that disagree with its pages", async (t) => {
    const main = tree.find((p) => p.followed.some(([a, b]) => b - a === 48))!
    const record = main.followed.find(([a, b]) => b - a === 48)![0]
    t.match(await damaged((fh) => fh.write(u64(999n), 0, 8, main.pgno * ps + record + 16)), /holds \d+ leaf pages, but its record says 999/)
  })

  const file = await readFile(original)
  const keysOf = (pgno: number) => {
    const p = file.subarray(pgno * ps, (pgno + 1) * ps)
    return Array.from({ length: p.readUInt16LE(20) >> 1 }, (_, i) => {
      const at = 24 + p.readUInt16LE(24 + 2 * i)
      return { at: pgno * ps + at + 8, key: p.subarray(at + 8, at + 8 + p.readUInt16LE(at + 6)) }
    })
  }
  t.test('a key out of order in its page (LMDB would not find it, or insert beside it)', async (t) => {
    const leaf = tree.find((p) => p.kind === 'leaf' && p.values.some((v) => v.db === 'events') && keysOf(p.pgno).length > 2)!
    const [k0, k1] = keysOf(leaf.pgno)
    t.ok(k0!.key[0]! > 0, 'the first key does not start with 0')
    const problem = await damaged((fh) => fh.write(Buffer.from([0]), 0, 1, k1!.at))
    t.match(problem, new RegExp(`page ${leaf.pgno} of its 'events' database has key 1 (out of order|outside its branch's range)`))
  })
  t.test('a key outside the range its branch page gives its page', async (t) => {
    const separators = keysOf(branch.pgno)
    t.ok(separators.length > 1, 'the branch page has separators')
    // The last separator raised to the top: every key of the page below it is now below its range.
    const last = separators[separators.length - 1]!
    const problem = await damaged((fh) => fh.write(Buffer.alloc(last.key.length, 0xfe), 0, last.key.length, last.at))
    t.match(problem, /has key \d+ (outside its branch's range|out of order)/)
  })
  t.test('a JSON value with bytes no encoder writes', async (t) => {
    const leaf = tree.find((p) => p.values.some((v) => v.db === 'heads' && v.range[1] - v.range[0] > 8))!
    const value = leaf.values.find((v) => v.db === 'heads' && v.range[1] - v.range[0] > 8)!
    const write = (fh: import('node:fs/promises').FileHandle) =>
      fh.write(Buffer.from([0x01, 0xc3]), 0, 2, leaf.pgno * ps + value.range[0] + 4)
    t.match(
      await damaged(write, sessionStoreValues()),
      new RegExp(`page ${leaf.pgno} of its 'heads' database has a value that is not JSON text`),
    )
    t.equal(await damaged(write), 'not refused: ok', 'only the value check finds it')
  })
  t.test('a JSON value on overflow pages', async (t) => {
    const ref = tree.flatMap((p) => p.followed.filter(([a, b]) => b - a === 24).map(([a]) => ({ page: p, a })))[0]!
    const pgno = Number(file.readBigUInt64LE(ref.page.pgno * ps + ref.a))
    const problem = await damaged((fh) => fh.write(Buffer.from('\u0000\u0007'), 0, 2, pgno * ps + 24 + 100), sessionStoreValues())
    t.match(problem, new RegExp(`has a value on overflow page ${pgno} that is not JSON text`))
  })

  t.test('a page budget: the largest databases are checked at their root only', async (t) => {
    const fh = await open(original, 'r')
    try {
      const meta = (await readFile(original)).subarray(ps + 24)
      const head = (await readFile(original)).subarray(24)
      const m = meta.readBigUInt64LE(128) > head.readBigUInt64LE(128) ? meta : head
      const snap = { pageSize: ps, filePages, lastPage, txnid: healthy.txnid }
      const roots = [
        { db: readDbRecord(m, 24), kind: 'free' as const, name: 'free-page tree' },
        { db: readDbRecord(m, 72), kind: 'main' as const, name: 'main tree' },
      ]
      const whole = findBrokenPage(fh, snap, roots)
      const bounded = findBrokenPage(fh, snap, roots, 4)
      t.equal(bounded.problem, null)
      t.ok(bounded.rootOnly.includes("'events' database"), `the event log at its root only (${bounded.rootOnly.join(', ')})`)
      t.ok(bounded.reads < whole.reads, `fewer pages read (${bounded.reads} < ${whole.reads})`)
    } finally {
      await fh.close()
    }
  })
})

t.test('what LMDB throws about a damaged file is the refusal naming it', async (t) => {
  const dir = '/srv/burrow'
  // lmdb-js's shape (src/misc.cpp throwLmdbError): mdb_strerror's text, LMDB's code in `code`.
  const thrown = Object.assign(new Error('MDB_CORRUPTED: Located page was wrong type'), { code: -30796 })
  for (const err of [thrown, new Error('reading the running turns failed', { cause: thrown })]) {
    const refusal = storeDamage(dir, 'session store', err)
    t.ok(refusal instanceof StartupError, 'a StartupError')
    t.equal(
      refusal?.message,
      `The session store file ${join(dir, 'lmdb', 'data.mdb')} is damaged: LMDB reports MDB_CORRUPTED: Located page was wrong type. Restore ${join(dir, 'lmdb')} from a backup, or move it aside to start with an empty store (and BURROW_ALLOW_EMPTY_STORE=true; its sessions are then gone).`,
    )
  }
  t.match(storeDamage(dir, 'memory store', thrown)?.message, join(dir, 'memory', 'lmdb', 'data.mdb'))
  t.equal(
    storeDamage(dir, 'session store', Object.assign(new Error('MDB_MAP_FULL'), { code: -30792 })),
    undefined,
    'a full map is no damage',
  )
  t.equal(storeDamage(dir, 'session store', new Error('ENOSPC')), undefined, 'nor any other error')
})

t.test('the value checks read the schema: a schema 2 directory (msgpack) and a schema 3 one (JSON) pass', async (t) => {
  for (const v of ['store-v2', 'store-v3']) {
    const dir = await tempDir(t, 'page-walk-fixture')
    await mkdir(join(dir, 'lmdb'))
    const file = join(dir, 'lmdb', 'data.mdb')
    await writeFile(file, gunzipSync(await readFile(join(import.meta.dirname, '..', 'fixtures', v, 'data.mdb.gz'))))
    const c = await checkLmdbFile(file, sessionStoreValues())
    t.equal(c.state, 'ok', `${v}: ${c.state === 'damaged' ? c.problem : c.state}`)
  }
})
