// The directories a normal life leaves behind start as before the empty-store check
// (empty-store.test.ts): none yet (the quick start), a store alone, memory without the store, and
// the store switched on later beside that memory.
import t, { type Test } from 'tap'
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { Api } from '../helpers/harness.js'
import { stopServer } from '../helpers/child-server.js'
import { assertStarts, startOn } from '../helpers/startup-faults.js'
import { tempDir } from '../helpers/temp-dir.js'

async function freshDir(t: Test): Promise<string> {
  return join(await tempDir(t, 'normal'), 'data')
}

t.test('directories of a normal life start', async (t) => {
  t.test('a new data directory, started, stopped and started again (no sessions yet)', async (t) => {
    const dir = await freshDir(t)
    await assertStarts(t, await startOn(dir))
    await assertStarts(t, await startOn(dir))
  })

  t.test('a store alone, holding sessions', async (t) => {
    const dir = await freshDir(t)
    const out = await startOn(dir, { BURROW_MEMORY_STORE: 'off' })
    if (out.kind !== 'listening') return t.fail(`did not start: ${out.stderr}`)
    await new Api(out.server.url).createSession()
    await stopServer(out.server)
    await rm(join(dir, 'sessions'), { recursive: true, force: true })
    await assertStarts(t, await startOn(dir))
  })

  t.test('memory without the session store (BURROW_SESSION_STORE=off), restarted, then with the store', async (t) => {
    const dir = await freshDir(t)
    const env = { BURROW_SESSION_STORE: 'off' }
    const out = await startOn(dir, env)
    if (out.kind !== 'listening') return t.fail(`did not start: ${out.stderr}`)
    const added = await new Api(out.server.url).post('/v1/memory', [{ content: 'a fact to keep' }])
    t.ok(added.status < 300, 'memory added')
    await stopServer(out.server)
    await assertStarts(t, await startOn(dir, env))
    await assertStarts(t, await startOn(dir), 'then with the session store switched on: memory is no sign of lost sessions')
  })
})
