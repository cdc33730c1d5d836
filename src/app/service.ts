import type { Logger } from '../core/logger.js'
import type { SessionService } from '../core/session-service.js'
import type { Telemetry } from '../core/telemetry.js'
import { Authenticator } from '../session/authenticator.js'
import { CompactionController } from '../session/compaction-controller.js'
import { DefaultCompactor } from '../session/default-compactor.js'
import type { SessionServiceDeps } from '../session/base-session-service.js'
import { EphemeralSessionService } from '../session/ephemeral-session-service.js'
import { IDEMPOTENCY_TTL_MS } from '../session/idempotency.js'
import { PersistentSessionService } from '../session/persistent-session-service.js'
import { Projector } from '../session/projector.js'
import { mkdirSync } from 'node:fs'
import { DataDirLock, DataDirLockedError } from '../store/data-dir-lock.js'
import { MemoryIdempotencyStore } from '../store/memory-idempotency-store.js'
import { ConfigError, type Config } from './config.js'
import { buildProviders } from './providers.js'
import { StartupError } from './startup-error.js'

export interface BuiltService {
  service: SessionService
  /** Present with the session store: the projection worker (tests wait on it). */
  projector?: Projector
  close(): Promise<void>
}

/** Wires the SessionService for a configuration: providers, auth, storage and capabilities. */
export async function buildService(config: Config, deps: { logger: Logger; telemetry: Telemetry; version: string }): Promise<BuiltService> {
  const unavailable: string[] = []
  if (config.memoryStore === 'hnsw') unavailable.push("BURROW_MEMORY_STORE=hnsw: the 'memory-store' capability is not built yet; set BURROW_MEMORY_STORE=off")
  if (unavailable.length > 0) throw new ConfigError(unavailable)

  const { registry, http } = buildProviders(config)
  const compaction = config.compaction ? new CompactionController(new DefaultCompactor(registry), deps.logger) : undefined
  const common: Omit<SessionServiceDeps, 'idempotency'> = {
    providers: registry,
    auth: new Authenticator(config.apiKeys),
    telemetry: deps.telemetry,
    logger: deps.logger,
    version: deps.version,
    capabilities: { session_store: config.sessionStore === 'lmdb', memory_store: false, session_compaction: config.compaction },
    limits: {
      maxSteps: config.maxTurnSteps, defaultMaxTokens: config.defaultMaxTokens, eventBuffer: config.eventBuffer,
      subscriberQueue: config.sseQueueLimit, maxLiveSessions: config.maxLiveSessions,
    },
    compactionDefaults: config.compactionDefaults,
    ...(compaction ? { compaction } : {}),
  }

  if (config.sessionStore === 'off') {
    const service = new EphemeralSessionService({ ...common, idempotency: new MemoryIdempotencyStore(IDEMPOTENCY_TTL_MS) })
    return { service, close: () => http.close() }
  }

  const { LmdbSessionRepository } = await optional(() => import('../store/lmdb-session-repository.js'), 'lmdb', 'BURROW_SESSION_STORE=lmdb')
  const lock = await lockDataDir(config.dataDir)
  let repository
  try {
    repository = await LmdbSessionRepository.open(config.dataDir, { durability: config.durability, idempotencyTtlMs: IDEMPOTENCY_TTL_MS })
  } catch (err) {
    await lock.release()
    await http.close()
    throw new StartupError(`Cannot open the session store in ${config.dataDir}: ${(err as Error).message}`)
  }
  const projector = new Projector(repository, config.dataDir, deps.logger)
  const service = new PersistentSessionService({
    ...common,
    repository,
    onCommit: (id) => projector.notify(id),
    onDelete: (id) => projector.remove(id),
  })
  await service.recover()
  await projector.start()
  const sweep = setInterval(() => {
    repository.sweepIdempotency().catch((err: unknown) => deps.logger.warn({ err }, 'idempotency sweep failed'))
  }, 3_600_000)
  sweep.unref()
  await repository.sweepIdempotency()
  return {
    service, projector,
    // After the HTTP server has stopped: the projection catches up, then the store closes.
    close: async () => {
      clearInterval(sweep)
      await projector.close()
      await repository.close()
      await lock.release()
      await http.close()
    },
  }
}

/** One process per data directory: a second one fails start-up clearly. */
async function lockDataDir(dir: string): Promise<DataDirLock> {
  mkdirSync(dir, { recursive: true })
  try {
    return await DataDirLock.acquire(dir)
  } catch (err) {
    if (err instanceof DataDirLockedError) throw new StartupError(err.message)
    throw err
  }
}

/** Loads a module behind an optional native dependency, failing start-up clearly when it is missing. */
async function optional<T>(load: () => Promise<T>, pkg: string, setting: string): Promise<T> {
  try {
    return await load()
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    if (e.code === 'ERR_MODULE_NOT_FOUND' || e.code === 'MODULE_NOT_FOUND' || /Cannot find (module|package)/.test(e.message ?? '') || /\.node\b/.test(e.message ?? '')) {
      throw new StartupError(`${setting} needs the optional dependency '${pkg}', which could not be loaded (${e.message.split('\n')[0]}). Install it (npm install ${pkg}) or switch the capability off.`)
    }
    throw err
  }
}
