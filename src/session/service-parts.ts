import type { ProviderRegistry } from '../core/llm.js'
import type { Logger } from '../core/logger.js'
import type { MemoryStore } from '../core/memory-store.js'
import type { EffectiveCompaction } from '../core/session-record.js'
import type { SessionRepository } from '../core/stores.js'
import type { InterruptResult } from '../core/wire.js'
import type { Telemetry } from '../core/telemetry.js'
import type { Tracer } from '../core/tracing.js'
import type { Authenticator } from './authenticator.js'
import type { CompactionController } from './compaction-controller.js'
import type { EventHub } from './event-hub.js'
import type { LiveSessions } from './live-sessions.js'
import type { TurnRunner } from './turn-runner.js'

export interface ServiceCapabilities {
  session_store: boolean
  memory_store: boolean
  session_compaction: boolean
}

/** Semantic memory as the service uses it (the `memory-store` capability). */
export interface MemoryPort {
  readonly store: MemoryStore
  /** When compaction feeds memory: the indexer, which tells the service what it indexed (recorded as `memory_indexed`). */
  readonly indexer?: { onIndexed(listener: (tenant: string, sessionId: string, entries: number) => Promise<void>): void } | undefined
  /** Opens the memory search spans. */
  readonly tracer?: Tracer | undefined
}

/**
 * The other replicas on the same store (PostgreSQL): an interrupt reaches the replica running the
 * turn, and this one is not ready while it cannot hear them.
 */
export interface ReplicaLink {
  /** The caller's interrupt, routed: `local` is this process's own (it answers from the stored state when no replica runs the turn). */
  interrupt(tenant: string, sessionId: string, local: () => Promise<InterruptResult>): Promise<InterruptResult>
  /** False while the other replicas' commits cannot be heard here (this replica's streams would miss them). */
  listening(): boolean
}

/** The parts a LocalSessionService is made of; `app/` wires them. */
export interface LocalSessionServiceParts {
  /** Where sessions are kept: LMDB, PostgreSQL, or the null repository (ephemeral mode). */
  repository: SessionRepository
  /** The live-session table, over the same repository and hub. */
  sessions: LiveSessions
  hub: EventHub
  runner: TurnRunner
  /** Present when the `session-compaction` capability is on. */
  compaction?: CompactionController | undefined
  /** Present when the `memory-store` capability is on. */
  memory?: MemoryPort | undefined
  /** Present when sessions are on PostgreSQL, where other replicas may serve them too. */
  replicas?: ReplicaLink | undefined
  auth: Authenticator
  providers: ProviderRegistry
  telemetry: Telemetry
  logger: Logger
  version: string
  capabilities: ServiceCapabilities
  compactionDefaults: EffectiveCompaction
}
