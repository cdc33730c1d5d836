import type { FastifyInstance } from 'fastify'
import type { SessionService } from '../core/session-service.js'
import type { Config } from './config.js'
import { buildHttpServer } from './http-server.js'
import { createLogger } from './logger.js'
import { Metrics } from './metrics.js'
import { buildService } from './service.js'
import { listenStartupError } from './startup-error.js'
import { VERSION } from './version.js'
import type { Logger as PinoLogger } from 'pino'
import type { Projector } from '../session/projector.js'
import type { MemoryIndexer } from '../session/memory-indexer.js'

export interface Burrow {
  app: FastifyInstance
  service: SessionService
  /** The projection worker, when the session store is on. */
  projector: Projector | undefined
  /** The memory indexing worker, when the memory store is on. */
  indexer: MemoryIndexer | undefined
  config: Config
  logger: PinoLogger
  /** Listens on the configured address and logs the one start-up line; returns the URL. */
  listen(): Promise<string>
  /** Graceful stop: no new work, running turns finish within the grace period or are interrupted, streams close. */
  close(): Promise<void>
}

/** The composition root: everything the service needs, wired from one checked Config. */
export async function createBurrow(config: Config, opts: { logger?: PinoLogger; defaultMetrics?: boolean } = {}): Promise<Burrow> {
  const logger = opts.logger ?? createLogger(config.logLevel)
  const metrics = new Metrics({ defaultMetrics: opts.defaultMetrics ?? true })
  const built = await buildService(config, { logger, telemetry: metrics, version: VERSION })
  const app = await buildHttpServer(config, built.service, metrics, logger)
  let closing: Promise<void> | null = null

  return {
    app, service: built.service, projector: built.projector, indexer: built.indexer, config, logger,
    async listen() {
      let url: string
      try {
        url = await app.listen({ host: config.host, port: config.port })
      } catch (err) {
        throw listenStartupError(err, config.host, config.port) ?? err
      }
      const caps = built.service.capabilities()
      logger.info({
        capabilities: { session_store: caps.session_store, memory_store: caps.memory_store, session_compaction: caps.session_compaction },
        providers: caps.providers.filter((p) => p.configured).map((p) => (p.offline ? `${p.name} (offline, deterministic)` : p.name)),
        default_model: caps.default_model,
        tenancy: caps.auth ? `multi-tenant (${new Set(config.apiKeys.values()).size} tenants, bearer auth)` : 'single-tenant (no BURROW_API_KEYS: no auth)',
        data_dir: config.dataDir,
        address: url,
        version: VERSION,
      }, `burrow listening on ${url}`)
      return url
    },
    close() {
      closing ??= (async () => {
        await built.service.shutdown(config.shutdownGraceMs)
        await app.close()
        await built.close()
      })()
      return closing
    },
  }
}
