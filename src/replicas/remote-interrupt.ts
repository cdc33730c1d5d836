import { BurrowError } from '../core/errors.js'
import type { InterruptResult } from '../core/wire.js'
import type { LiveSessions } from '../session/live-sessions.js'
import type { Turn } from '../session/turn.js'

/** How the replicas reach each other for an interrupt (the PostgreSQL change feed's interrupt channel). */
export interface InterruptBus {
  /** Asks the replica running the session's turn to interrupt it: its number once it ended there, null if no replica runs it. */
  interrupt(tenant: string, sessionId: string, findMs: number, endMs: number): Promise<number | null>
}

/** How long a replica running the turn has to say so; how long it then has to end the turn. */
const FIND_MS = 1_000
const END_MS = 30_000

/**
 * Interrupts across replicas: the service routes its `interrupt` through this (its
 * `ReplicaLink`, wired by app/) when sessions are on PostgreSQL. A turn running here is interrupted here. Otherwise,
 * when the store says the session's turn is running, the request goes to the replicas; the one
 * running it interrupts it and answers once it has ended, and the caller gets what one node would
 * answer: `{ interrupted: true, turn }`. When no replica answers (none runs it: its replica died),
 * or the store says nothing runs, the local service answers from the stored state, as on one node
 * — closes a turn waiting for tool results, or one left open, and answers `interrupted: false`
 * when there is none.
 */
export class RemoteInterrupt {
  constructor(
    private readonly sessions: LiveSessions,
    private readonly bus: InterruptBus,
    /** Whether the store says a turn of the tenant's session is running (false for an unknown id). */
    private readonly runningInStore: (tenant: string, sessionId: string) => Promise<boolean>,
  ) {}

  /** The routed interrupt: `local` is the service's own, `tenant` the caller's (authenticated). */
  async interrupt(tenant: string, id: string, local: () => Promise<InterruptResult>): Promise<InterruptResult> {
    if (this.runningHere(tenant, id)) return local()
    let turn: number | null = null
    try {
      if (await this.runningInStore(tenant, id)) turn = await this.bus.interrupt(tenant, id, FIND_MS, END_MS)
    } catch {
      // The database cannot be asked: the local service answers (STORE_UNAVAILABLE when it needs the store too).
    }
    if (turn === null) return local()
    return { session_id: id, interrupted: true, turn }
  }

  private runningHere(tenant: string, id: string): Turn | undefined {
    return this.sessions.running().find((w): w is Turn => {
      const s = (w as Turn).session
      return s?.id === id && s.tenant === tenant
    })
  }

  /** Another replica's request (the bus hands it here): the turn is interrupted if it runs here, as the service's own interrupt does. */
  async here(tenant: string, id: string, found: (turn: number) => void): Promise<number | null> {
    const running = this.runningHere(tenant, id)
    if (!running) return null
    found(running.number)
    running.signal.abort(new BurrowError('INTERRUPTED', 'The turn was interrupted by a client.'))
    await running.done.catch(() => undefined)
    return running.number
  }
}
