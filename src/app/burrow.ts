import type { FastifyInstance } from 'fastify'
import type { SessionService } from '../core/session-service.js'
import type { Config } from './config.js'
import { buildHttpServer } from './http-server.js'
import { HttpDrain } from './http-drain.js'
import { createLogger } from './logger.js'
import { Metrics } from './metrics.js'
import { describeDatabase } from './pg-store.js'
import { buildService } from './service.js'
import { listenStartupError } from './startup-error.js'
import { VERSION } from './version.js'
import { NO_TRACING } from '../core/tracing.js'
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
  /**
   * Graceful stop: no new work; event streams end with `stream_closed`; running turns finish within
   * the grace period or are interrupted; every answer is delivered before its connection closes.
   */
  close(): Promise<void>
}

/**
 * After the last turn has ended, how long its answer (and any other response in flight) gets to
 * reach the kernel before its connection is destroyed; the grace period itself, when longer, also
 * counts. It only runs out for clients that do not read; bin/server.ts's hard stop comes later.
 */
const FLUSH_MARGIN_MS = 2_000

/** How long shutdown waits for the trace collector to take the last spans (a dead one never holds it longer). */
const TRACE_FLUSH_MS = 5_000

/** The composition root: everything the service needs, wired from one checked Config. */
export async function createBurrow(config: Config, opts: { logger?: PinoLogger; defaultMetrics?: boolean } = {}): Promise<Burrow> {
  const logger = opts.logger ?? createLogger(config.logLevel)
  if (config.embedderOverridden && config.memoryStore !== 'off')
    logger.warn(
      { ignored: `BURROW_EMBEDDER=${config.embedderOverridden}`, embedder: 'endpoint' },
      'BURROW_EMBEDDINGS_URL overrides BURROW_EMBEDDER: memory embeds through the endpoint',
    )
  const metrics = new Metrics({ defaultMetrics: opts.defaultMetrics ?? true, prices: config.modelPrices })
  // Tracing off (no OTLP endpoint): the tracing code is never loaded and every span is the shared no-op one.
  const tracing = config.tracing
    ? (await import('./otel-tracing.js')).openTelemetryTracing(config.tracing, { logger, version: VERSION })
    : undefined
  const tracer = tracing?.tracer ?? NO_TRACING
  let built: Awaited<ReturnType<typeof buildService>>
  try {
    built = await buildService(config, { logger, telemetry: metrics, tracer, version: VERSION })
  } catch (err) {
    await tracing?.shutdown(TRACE_FLUSH_MS)
    throw err
  }
  const memory = built.memory
  if (memory?.indexBacklog)
    metrics.watch(
      'burrow_memory_index_backlog',
      'Memory entries acknowledged but not yet in the vector index (searched exactly meanwhile).',
      () => memory.indexBacklog!(),
    )
  if (tracing)
    metrics.watchCounter(
      'burrow_trace_spans_dropped_total',
      'Spans not exported, by reason: queue_full (the collector falls behind), export_failed (it refused or could not be reached).',
      'reason',
      tracing.dropped,
    )
  metrics.watch('burrow_turns_queued', 'Turn requests waiting for their session (on_busy: queue) on this replica.', built.queuedTurns)
  const app = await buildHttpServer(config, built.service, metrics, logger, tracer)
  const drain = new HttpDrain(app.server)
  let closing: Promise<void> | null = null

  return {
    app,
    service: built.service,
    projector: built.projector,
    indexer: built.indexer,
    config,
    logger,
    async listen() {
      let url: string
      try {
        url = await app.listen({ host: config.host, port: config.port })
      } catch (err) {
        throw listenStartupError(err, config.host, config.port) ?? err
      }
      const caps = built.service.capabilities()
      logger.info(
        {
          capabilities: { session_store: caps.session_store, memory_store: caps.memory_store, session_compaction: caps.session_compaction },
          providers: caps.providers.filter((p) => p.configured).map((p) => (p.offline ? `${p.name} (offline, deterministic)` : p.name)),
          default_model: caps.default_model,
          tenancy: caps.auth
            ? `multi-tenant (${new Set(config.apiKeys.values()).size} tenants, bearer auth)`
            : 'single-tenant (no BURROW_API_KEYS: no auth)',
          data_dir: config.dataDir,
          ...(config.sessionStore !== 'off'
            ? { projection: !config.projection ? 'off' : config.sessionStore === 'postgres' ? 'on (one elected replica writes)' : 'on' }
            : {}),
          ...(config.sessionStore === 'postgres' || config.memoryStore === 'postgres'
            ? { database: describeDatabase(config.databaseUrl!), replica_id: config.replicaId }
            : {}),
          ...(built.embedder ? { embedder: built.embedder } : {}),
          address: url,
          console: `${url}/console`,
          version: VERSION,
        },
        `burrow listening on ${url} (console: ${url}/console)`,
      )
      return url
    },
    close() {
      // The order, and why:
      // 1. drain.begin(): responses from now on say `Connection: close`, so kept-alive clients go
      //    elsewhere. The listener stays open, so probes and late clients get SHUTTING_DOWN and
      //    /readyz 503 from the service instead of a refused connection.
      // 2. service.shutdown(): refuses new work, ends event subscriptions with `stream_closed`
      //    (their handlers return and end those responses), lets running turns finish within the
      //    grace period and interrupts the rest, waiting until their `turn_failed` is recorded.
      // 3. drain.close(): only now stop listening (idle kept-alive sockets close with it). A turn's
      //    answer is written after its events are durable — after the service considers the turn
      //    done — so each request in flight is waited for until its response is flushed, and its
      //    socket is ended then; whatever is left when the grace period and the margin are over is
      //    destroyed.
      // 4. app.close(): fastify's onClose hooks (the MCP server); no connection is left to cut.
      // 5. built.close(): the stores last, since the requests drained in 3 read and write them.
      // 6. tracing: the last spans (the drained requests', the turns') are flushed, within TRACE_FLUSH_MS.
      closing ??= (async () => {
        const graceEnd = performance.now() + config.shutdownGraceMs
        drain.begin()
        await built.service.shutdown(config.shutdownGraceMs)
        const drained = await drain.close(Math.max(0, graceEnd - performance.now()) + FLUSH_MARGIN_MS)
        const fields = { in_flight: drained.inFlight, forced: drained.forced, cut: drained.cut, ms: Math.round(drained.ms) }
        // One message either way, so the line is easy to find; a forced drain is worth a warning.
        if (drained.forced) logger.warn(fields, 'http drained')
        else logger.info(fields, 'http drained')
        try {
          await app.close()
          await built.close()
        } finally {
          await tracing?.shutdown(TRACE_FLUSH_MS)
        }
      })()
      return closing
    },
  }
}
