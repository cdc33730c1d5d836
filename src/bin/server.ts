#!/usr/bin/env node
import { loadConfig } from '../app/config.js'
import { loadEnvFile } from '../app/env-file.js'
import { EXIT, StartupError } from '../app/startup-error.js'
import { createBurrow, type Burrow } from '../app/burrow.js'
import { installProcessGuard } from '../app/process-guard.js'

/**
 * `npm start`: configuration from the environment (and `.env` in the working directory, when there
 * is one), graceful stop on SIGTERM/SIGINT. A start-up the operator can fix exits 78 with one
 * `burrow: …` line on stderr; anything else is a bug and keeps its stack.
 */
async function main(): Promise<void> {
  let burrow: Burrow | undefined
  try {
    const envFile = loadEnvFile()
    burrow = await createBurrow(loadConfig())
    if (envFile) burrow.logger.info({ env_file: envFile }, `read ${envFile}`)
    installProcessGuard(burrow.logger)
    await burrow.listen()
  } catch (err) {
    if (!(err instanceof StartupError)) throw err
    // Release the data directory and close the stores before exiting; never wait long for it.
    if (burrow) {
      let timer: NodeJS.Timeout | undefined
      await Promise.race([
        burrow.close().catch(() => undefined),
        new Promise((r) => {
          timer = setTimeout(r, 5_000)
        }),
      ])
      clearTimeout(timer)
    }
    process.stderr.write(`burrow: ${err.message}\n`)
    process.exit(EXIT.CONFIG)
  }
  const running = burrow
  const stop = (signal: string) => {
    running.logger.info({ signal }, 'shutting down')
    const hard = setTimeout(() => process.exit(EXIT.FAILURE), running.config.shutdownGraceMs + 10_000)
    hard.unref()
    running.close().then(
      () => process.exit(EXIT.OK),
      (err) => {
        running.logger.error({ err }, 'shutdown failed')
        process.exit(EXIT.FAILURE)
      },
    )
  }
  process.once('SIGTERM', () => stop('SIGTERM'))
  process.once('SIGINT', () => stop('SIGINT'))
}

main().catch((err) => {
  process.stderr.write(`burrow: failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`)
  process.exit(EXIT.FAILURE)
})
