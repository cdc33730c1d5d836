import type { Logger } from '../core/logger.js'
import type { SessionService } from '../core/session-service.js'
import type { Telemetry } from '../core/telemetry.js'
import { Authenticator } from '../session/authenticator.js'
import { EphemeralSessionService } from '../session/ephemeral-session-service.js'
import { IDEMPOTENCY_TTL_MS } from '../session/idempotency.js'
import { MemoryIdempotencyStore } from '../store/memory-idempotency-store.js'
import { ConfigError, type Config } from './config.js'
import { buildProviders } from './providers.js'

export interface BuiltService {
  service: SessionService
  close(): Promise<void>
}

/** Wires the SessionService for a configuration: providers, auth, storage and capabilities. */
export async function buildService(config: Config, deps: { logger: Logger; telemetry: Telemetry; version: string }): Promise<BuiltService> {
  const unavailable: string[] = []
  if (config.sessionStore === 'lmdb') unavailable.push("BURROW_SESSION_STORE=lmdb: the 'session-store' capability is not built yet; set BURROW_SESSION_STORE=off")
  if (config.memoryStore === 'hnsw') unavailable.push("BURROW_MEMORY_STORE=hnsw: the 'memory-store' capability is not built yet; set BURROW_MEMORY_STORE=off")
  if (config.compaction) unavailable.push("BURROW_COMPACTION=on: the 'session-compaction' capability is not built yet; set BURROW_COMPACTION=off")
  if (unavailable.length > 0) throw new ConfigError(unavailable)

  const { registry, http } = buildProviders(config)
  const service = new EphemeralSessionService({
    providers: registry,
    auth: new Authenticator(config.apiKeys),
    idempotency: new MemoryIdempotencyStore(IDEMPOTENCY_TTL_MS),
    telemetry: deps.telemetry,
    logger: deps.logger,
    version: deps.version,
    capabilities: { session_store: false, memory_store: false, session_compaction: false },
    limits: {
      maxSteps: config.maxTurnSteps, defaultMaxTokens: config.defaultMaxTokens, eventBuffer: config.eventBuffer,
      subscriberQueue: config.sseQueueLimit, maxLiveSessions: config.maxLiveSessions,
    },
    compactionDefaults: config.compactionDefaults,
  })
  return { service, close: () => http.close() }
}
