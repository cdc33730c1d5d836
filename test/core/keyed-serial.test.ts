// One task at a time per key, keys in parallel; a failure is its own task's and does not stop the key.
import t from 'tap'
import { KeyedSerial } from '../../src/core/keyed-serial.js'

const later = () => {
  let open!: () => void
  const p = new Promise<void>((r) => (open = r))
  return { p, open }
}

t.test('tasks of one key run in order, one at a time; another key does not wait', async (t) => {
  const serial = new KeyedSerial()
  const log: string[] = []
  const gate = later()
  const a1 = serial.run('a', async () => {
    log.push('a1 start')
    await gate.p
    log.push('a1 end')
    return 1
  })
  const a2 = serial.run('a', () => {
    log.push('a2')
    return 2
  })
  const b1 = serial.run('b', () => {
    log.push('b1')
    return 3
  })
  t.equal(await b1, 3)
  await new Promise((r) => setImmediate(r))
  t.same(log, ['a1 start', 'b1'], 'b ran while a1 was running; a2 waits for a1')
  t.equal(serial.size, 1, 'b is forgotten once done')
  gate.open()
  t.same([await a1, await a2], [1, 2])
  t.same(log, ['a1 start', 'b1', 'a1 end', 'a2'])
  await serial.idle()
  t.equal(serial.size, 0)
})

t.test("a rejected task is its caller's; the key goes on", async (t) => {
  const serial = new KeyedSerial()
  const failed = serial.run('k', () => Promise.reject(new Error('boom')))
  const next = serial.run('k', () => 'after')
  await t.rejects(failed, /boom/)
  t.equal(await next, 'after')
  const thrown = serial.run('k', () => {
    throw new Error('sync throw')
  })
  await t.rejects(thrown, /sync throw/)
  t.equal(await serial.run('k', () => 'still'), 'still')
})

t.test('idle waits for tasks queued while it waits', async (t) => {
  const serial = new KeyedSerial()
  const done: number[] = []
  void serial.run('k', async () => {
    await new Promise((r) => setTimeout(r, 5))
    done.push(1)
    void serial.run('j', async () => {
      await new Promise((r) => setTimeout(r, 5))
      done.push(2)
    })
  })
  await serial.idle()
  t.same(done, [1, 2])
})
