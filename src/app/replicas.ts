import type { Logger } from '../core/logger.js'
import type { EventHub } from '../session/event-hub.js'
import { LeaseKeeper } from '../replicas/lease-keeper.js'
import { LeasedOwner } from '../replicas/leased-owner.js'
import { RemoteInterrupt } from '../replicas/remote-interrupt.js'
import { ReplicaFeed } from '../replicas/replica-feed.js'
import type { LiveSessions } from '../session/live-sessions.js'
import type { ReplicaLink } from '../session/service-parts.js'
import type { Ownership } from '../session/session-ownership.js'
import type { PgChangeFeed } from '../store/pg-change-feed.js'
import type { PgSessionRepository } from '../store/pg-session-repository.js'
import type { Config } from './config.js'

/** How long a replica waits for the one keeping a session's lease to give it up: past it, SESSION_BUSY (that replica died, or is cut off). */
const LET_GO_WAIT_MS = 500

/**
 * The replicas' wing, made before the cache of live sessions (whose ownership it gives), connected
 * to that cache once it exists, and started once the service has recovered its sessions.
 */
export interface Replicas {
  /** Sessions owned under leases (replicas/leased-owner.ts), for the cache of live sessions. */
  readonly ownership: Ownership
  /** Connects the wing to the cache of live sessions (once): deletions heard from others, interrupts. */
  connect(sessions: LiveSessions): void
  readonly link: ReplicaLink
  /** Starts listening to the other replicas (resolves after the first attempt; it goes on trying in the background). */
  start(): Promise<void>
  close(): Promise<void>
}

/**
 * Many replicas on one PostgreSQL database (docs/scaling.md): the change feed between them. Each
 * commit here is announced (NOTIFY) and so is each text delta; what other replicas announce is
 * read back from the log and published to subscribers here; interrupts reach the replica that runs
 * the turn (the service routes them through `link`), and the replica is not ready while its
 * listener connection is down.
 */
export async function linkReplicas(parts: {
  config: Config
  store: PgSessionRepository
  hub: EventHub
  logger: Logger
}): Promise<Replicas> {
  const { config, store, hub, logger } = parts
  let sessions: LiveSessions | null = null
  let owner: LeasedOwner | null = null
  let remote: RemoteInterrupt | null = null
  const { PgChangeFeed } = await import('../store/pg-change-feed.js')
  const incoming = new ReplicaFeed(
    hub,
    store.events,
    (err, sessionId) =>
      logger.warn({ err, session_id: sessionId }, "another replica's events could not be read: its next commit catches up"),
    (sessionId) => sessions?.deletedRemotely(sessionId),
  )
  const feed: PgChangeFeed = new PgChangeFeed({
    url: config.databaseUrl!,
    replicaId: config.replicaId,
    sink: {
      committed(tenant, sessionId, first, last) {
        incoming.committed(tenant, sessionId, first, last)
        store.journal.advanced(tenant, false) // the tenant streams here read it from the journal
      },
      delta: (...a) => incoming.delta(...a),
      deleted: (...a) => incoming.deleted(...a),
      watching: () => incoming.watching(),
    },
    onListening: (listening, err) => {
      if (listening) logger.info({}, 'listening to the other replicas again: ready; subscribers catch up from the log')
      else
        logger.error(
          { err },
          "the listener connection to the database is down: other replicas' events are not streamed here and /readyz answers 503 until it reconnects",
        )
    },
    onError: (err, what) => logger.warn({ err }, `change feed: ${what} failed`),
    // Other replicas' requests, answered once the live sessions are connected (nothing runs here before).
    interrupts: (tenant, id, found) => (remote ? remote.here(tenant, id, found) : Promise.resolve(null)),
    // A session's lease kept here after its work is given up when another replica asks (lease-keeper.ts).
    letGo: (_tenant, id) => (owner ? owner.giveUp(id) : Promise.resolve(null)),
  })
  store.onCommitted((tenant, sessionId, first, last) => {
    try {
      feed.committed(tenant, sessionId, first, last)
    } catch (err) {
      // On the commit's path, which must go on: the other replicas catch up at this session's next commit.
      logger.warn({ err, session_id: sessionId }, 'a commit could not be announced to the other replicas')
    }
  })
  store.onDeleted((tenant, sessionId) => feed.deleted(tenant, sessionId))
  hub.sendDeltas((e, tenant) => feed.delta(tenant, e.session_id, e.turn, e.seq, e.at, (e.data as { text: string }).text))
  const leases = store.leases
  return {
    ownership: (cache) => {
      const letGo = (tenant: string, id: string) => feed.letGo(tenant, id, LET_GO_WAIT_MS)
      owner = new LeasedOwner(cache, new LeaseKeeper(leases, logger, config.leaseLingerMs, letGo))
      return owner
    },
    connect(live) {
      if (sessions) throw new Error('the replicas are connected to the live sessions already')
      sessions = live
      remote = new RemoteInterrupt(live, feed, (tenant, id) => feed.running(tenant, id))
    },
    link: {
      interrupt: (tenant, id, local) => (remote ? remote.interrupt(tenant, id, local) : local()),
      listening: () => feed.listening,
    },
    start: () => feed.start(),
    async close() {
      await feed.close()
      await incoming.idle()
    },
  }
}
