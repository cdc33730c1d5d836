import type { Harness } from '../helpers/harness.js'

/**
 * Closes a harness while holding the event loop open. The projector's drain awaits an
 * unref'd duty-cycle timer (src/session/projector.ts), so a close that lands in that sleep
 * awaits nothing that keeps the process alive, and the test process can exit mid-teardown.
 */
export async function closeHarness(h: Harness): Promise<void> {
  const keepAlive = setInterval(() => {}, 50)
  try {
    await h.close()
  } finally {
    clearInterval(keepAlive)
  }
}
