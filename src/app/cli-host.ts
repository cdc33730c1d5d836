import { pino } from 'pino'
import { BurrowClient } from '../client/burrow-client.js'
import { EXIT } from '../core/protocol-numbers.js'
import { CliFatal, type CliBackend, type CliHost, type CliIo } from '../surfaces/cli/cli.js'
import { createBurrow } from './burrow.js'
import { installProcessGuard } from './process-guard.js'
import { loadConfig, type Config } from './config.js'
import { Metrics } from './metrics.js'
import { buildService } from './service.js'
import { StartupError } from './startup-error.js'
import { VERSION } from './version.js'

export { runCli } from '../surfaces/cli/cli.js'

type Env = Record<string, string | undefined>

/**
 * The process around `burrow <command>`: the service in-process on the data dir (logging
 * to stderr, so stdout carries only output and protocol messages), a typed client of a
 * running server (`--url`), or the HTTP server itself (`serve`).
 */
export function cliHost(io: CliIo, env: Env = process.env): CliHost {
  return {
    io,
    env,
    version: VERSION,
    async connect({ url, dataDir }): Promise<CliBackend> {
      if (url) {
        if (!/^https?:\/\//.test(url)) throw new CliFatal(`--url must be an http(s) URL, got '${url}'.`, EXIT.CONFIG)
        return { ops: new BurrowClient({ baseUrl: url }), close: async () => {} }
      }
      const config = configFor(env, dataDir)
      const logger = pino({ level: env.LOG_LEVEL || 'error', base: { service: 'burrow' } }, pino.destination({ dest: 2, sync: true }))
      let built
      try {
        built = await buildService(config, { logger, telemetry: new Metrics({ defaultMetrics: false }), version: VERSION })
      } catch (err) {
        if (err instanceof StartupError) {
          const hint = /in use by another Burrow process/.test(err.message)
            ? ' With the CLI: pass --url http://HOST:PORT of that server.'
            : ''
          throw new CliFatal(`${err.message}${hint}`, EXIT.CONFIG)
        }
        throw err
      }
      return {
        ops: built.service,
        async close() {
          await built.service.shutdown(config.shutdownGraceMs)
          await built.close()
        },
      }
    },
    async serve({ host, port, dataDir }): Promise<number> {
      const config = configFor({ ...env, ...(host ? { HOST: host } : {}), ...(port !== undefined ? { PORT: String(port) } : {}) }, dataDir)
      let burrow
      try {
        burrow = await createBurrow(config)
      } catch (err) {
        if (err instanceof StartupError) throw new CliFatal(err.message, EXIT.CONFIG)
        throw err
      }
      installProcessGuard(burrow.logger)
      try {
        await burrow.listen()
      } catch (err) {
        // An address in use or not ours is the operator's to fix, as in `npm start`: release the data dir, exit 78.
        if (!(err instanceof StartupError)) throw err
        await burrow.close().catch(() => undefined)
        throw new CliFatal(err.message, EXIT.CONFIG)
      }
      return new Promise<number>((resolve) => {
        const stop = (signal: string) => {
          burrow.logger.info({ signal }, 'shutting down')
          burrow.close().then(
            () => resolve(EXIT.OK),
            (err) => {
              burrow.logger.error({ err }, 'shutdown failed')
              resolve(EXIT.FAILURE)
            },
          )
        }
        process.once('SIGTERM', () => stop('SIGTERM'))
        process.once('SIGINT', () => stop('SIGINT'))
      })
    },
    onInterrupt(cb) {
      let pressed = false
      const handler = () => {
        if (pressed) process.exit(EXIT.INTERRUPTED) // a second Ctrl-C does not wait for the turn to stop
        pressed = true
        cb()
      }
      process.on('SIGINT', handler)
      return () => {
        process.off('SIGINT', handler)
      }
    },
  }
}

function configFor(env: Env, dataDir: string | undefined): Config {
  try {
    return loadConfig(dataDir ? { ...env, BURROW_DATA_DIR: dataDir } : env)
  } catch (err) {
    if (err instanceof StartupError) throw new CliFatal(err.message, EXIT.CONFIG)
    throw err
  }
}
