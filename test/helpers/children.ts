// Child processes a test file started are killed when the file's tests end, stopped by their
// test or not: a test that fails between starting a server and stopping it must not leave the
// server running (nor keep this process alive until its timeout). Children also watch for their
// parent's death themselves (lifeline.mjs), for a test process that is killed.
import t from 'tap'
import type { ChildProcess } from 'node:child_process'

const running = new Set<ChildProcess>()
let hooked = false

/** Kills `child` (SIGKILL) at the end of this test file if it still runs then; returns it. */
export function reaped<C extends ChildProcess>(child: C): C {
  running.add(child)
  child.once('exit', () => running.delete(child))
  if (!hooked) {
    hooked = true
    t.teardown(killAll)
    process.once('exit', killAll)
  }
  return child
}

function killAll(): void {
  for (const c of running) c.kill('SIGKILL')
  running.clear()
}
