// A data directory that holds projected sessions but whose session store is missing or holds no
// sessions is refused (the wrong directory, or a lost store: starting fresh would hide
// every session) unless BURROW_ALLOW_EMPTY_STORE=true. (normal-starts.test.ts: what a normal life
// leaves behind still starts.)
import t, { type Test } from 'tap'
import { cp, readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { Api } from '../helpers/harness.js'
import { stopServer } from '../helpers/child-server.js'
import { assertRefused, assertStarts, copyDataDir, SESSIONS, startOn, writeDataDir } from '../helpers/startup-faults.js'
import { tempDir } from '../helpers/temp-dir.js'

async function freshDir(t: Test): Promise<string> {
  return join(await tempDir(t, 'empty'), 'data')
}

t.test('a missing or empty session store beside projected sessions', async (t) => {
  const template = await writeDataDir(t)

  t.test('store missing, projections present: refused', async (t) => {
    const dir = await copyDataDir(t, template)
    await rm(join(dir, 'lmdb'), { recursive: true })
    await assertRefused(t, await startOn(dir), [join(dir, 'lmdb', 'data.mdb'), join(dir, 'sessions'), 'BURROW_ALLOW_EMPTY_STORE'])
    t.equal((await readdir(join(dir, 'sessions'))).length, SESSIONS, 'the projections are untouched')
    t.same(await readdir(dir).then((d) => d.includes('lmdb')), false, 'no store was created')
  })

  t.test('store present but holding no sessions, projections present: refused', async (t) => {
    // An empty store written by the real server, put where the template's store was.
    const empty = await freshDir(t)
    await assertStarts(t, await startOn(empty, { BURROW_MEMORY_STORE: 'off' }))
    const dir = await copyDataDir(t, template)
    await rm(join(dir, 'lmdb'), { recursive: true })
    await cp(join(empty, 'lmdb'), join(dir, 'lmdb'), { recursive: true })
    await assertRefused(t, await startOn(dir), [join(dir, 'lmdb', 'data.mdb'), join(dir, 'sessions'), 'BURROW_ALLOW_EMPTY_STORE'])
  })

  t.test('store missing, projections present, BURROW_ALLOW_EMPTY_STORE=true: starts with no sessions', async (t) => {
    const dir = await copyDataDir(t, template)
    await rm(join(dir, 'lmdb'), { recursive: true })
    const out = await startOn(dir, { BURROW_ALLOW_EMPTY_STORE: 'true' })
    if (out.kind !== 'listening') return t.fail(`did not start: ${out.stderr}`)
    try {
      const list = await new Api(out.server.url).get('/v1/sessions')
      t.equal(list.status, 200)
      t.same(list.body.items, [], 'a new, empty store')
    } finally {
      await stopServer(out.server)
    }
  })
})
