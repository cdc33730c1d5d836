// A session reads as running until its turn's events are durable. A turn gives up the session's
// slot at its last event, before it is durable (a queued turn starts at once), and the event list
// shows durable events only; a client that waits for `running: false` and then lists the events
// must find the turn's end there. The commit is held back for real: another process holds LMDB's
// write lock (LMDB locks writers across processes), while the server's event loop stays free.
import t from 'tap'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { sleep, startBurrow } from '../helpers/harness.js'

/** Another process that holds the environment's write transaction for `ms`, resolved once it holds it. */
async function holdWriteLock(path: string, ms: number): Promise<{ released: Promise<void> }> {
  const script = `const { open } = require('lmdb')
const root = open({ path: ${JSON.stringify(path)}, maxDbs: 20 })
root.transactionSync(() => {
  process.stdout.write('held\\n')
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ${ms})
})`
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  const exited = new Promise<void>((resolve, reject) =>
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`the lock holder exited with ${code}`)))),
  )
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d) => String(d).includes('held') && resolve())
    exited.catch(reject)
  })
  return { released: exited }
}

t.test('while the ended turn is not durable the session reads as running; once not, its end is listed', async (t) => {
  const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb', BURROW_MEMORY_STORE: 'off' })
  t.teardown(() => h.close())
  const api = h.api
  const id = await api.createSession({})
  t.equal((await api.turn(id, { input: 'first' })).status, 200)

  const { released } = await holdWriteLock(join(h.dataDir, 'lmdb'), 1500)
  let answered = false
  const turn = api.turn(id, { input: 'held back' }).finally(() => (answered = true))
  let sawRunning = 0
  while (!answered) {
    await sleep(100)
    const view = (await api.get(`/v1/sessions/${id}`)).body
    const last = (await api.get(`/v1/sessions/${id}/event-log?after=0&limit=100`)).body.events.at(-1)
    if (view.running) sawRunning++
    // The offline model answered at once: the turn has ended here, its events wait for the lock.
    else if (view.turn_count === 2) t.match(last, { type: 'turn_completed', turn: 2 }, 'not running: the turn’s end is listed')
  }
  t.ok(sawRunning >= 5, `running while its events waited for the disk (${sawRunning} reads)`)
  t.equal((await turn).status, 200)
  await released
  t.equal((await api.get(`/v1/sessions/${id}`)).body.running, false, 'answered: not running')
  t.match((await api.get(`/v1/sessions/${id}/event-log?after=0&limit=100`)).body.events.at(-1), { type: 'turn_completed', turn: 2 })
})
