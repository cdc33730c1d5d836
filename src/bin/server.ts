#!/usr/bin/env node
import { loadConfig } from '../app/config.js'
import { StartupError } from '../app/startup-error.js'
import { createBurrow } from '../app/burrow.js'
import { installProcessGuard } from '../app/process-guard.js'

/** `npm start`: configuration from the environment, graceful stop on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  let burrow
  try {
    burrow = await createBurrow(loadConfig())
  } catch (err) {
    if (err instanceof StartupError) {
      process.stderr.write(`burrow: ${err.message}\n`)
      process.exit(78)
    }
    throw err
  }
  installProcessGuard(burrow.logger)
  await burrow.listen()
  const stop = (signal: string) => {
    burrow.logger.info({ signal }, 'shutting down')
    const hard = setTimeout(() => process.exit(1), burrow.config.shutdownGraceMs + 10_000)
    hard.unref()
    burrow.close().then(() => process.exit(0), (err) => { burrow.logger.error({ err }, 'shutdown failed'); process.exit(1) })
  }
  process.once('SIGTERM', () => stop('SIGTERM'))
  process.once('SIGINT', () => stop('SIGINT'))
}

main().catch((err) => {
  process.stderr.write(`burrow: failed to start: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
  process.exit(1)
})
