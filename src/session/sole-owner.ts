import { closeOpenTurn } from './close-turn.js'
import type { LiveSession } from './live-session.js'
import type { SessionCache, SessionOwnership } from './session-ownership.js'

/**
 * One process owns every session of its store (LMDB, the in-memory and null repositories): work
 * needs nothing to own a session, the cache is the truth, and a turn the store says is running was
 * left by a previous process of this one's.
 */
export class SoleOwner implements SessionOwnership {
  readonly shared = false

  constructor(private readonly cache: SessionCache) {}

  hold<T>(_s: LiveSession, work: () => Promise<T>): Promise<T> {
    return work()
  }

  fence(): number {
    return 0
  }

  current(s: LiveSession): LiveSession {
    return s
  }

  streamStart(): undefined {
    return undefined
  }

  /**
   * Closes every turn a previous process left running: synthetic results for its open tool calls,
   * then `turn_failed` with `reason: process_restarted`. Run once, at start-up.
   */
  async recover(): Promise<number> {
    const { repository: repo, logger } = this.cache
    let n = 0
    for (const id of await repo.sessions.runningTurns()) {
      const record = await repo.sessions.get(id)
      if (!record?.open_turn) continue
      const turn = record.open_turn.turn
      const s = this.cache.adopt(record)
      await closeOpenTurn(s, 'INTERRUPTED', 'The process stopped while this turn was running.', 'process_restarted')
      await this.cache.settle(s)
      logger.warn({ session_id: id, turn }, 'closed a turn left running by a previous process')
      n++
    }
    return n
  }

  forget(): void {}

  async close(): Promise<void> {}
}

/** The ownership of one process. */
export const soleOwner = (cache: SessionCache): SessionOwnership => new SoleOwner(cache)
