import { BurrowError } from '../core/errors.js'
import type { InterruptResult, OnBusy } from '../core/wire.js'
import type { LiveSession } from './live-session.js'
import type { LiveSessions } from './live-sessions.js'
import type { ReplicaLink } from './service-parts.js'

/** Requests that may wait in one session's line on one replica; one more is SESSION_BUSY (`queue_full`). */
export const MAX_QUEUED_TURNS = 16
/** How long a queued request keeps trying for a session another replica works on before it is SESSION_BUSY. */
const ELSEWHERE_WAIT_MS = 10 * 60_000
const ELSEWHERE_FIRST_PAUSE_MS = 5
const ELSEWHERE_MAX_PAUSE_MS = 250

/** How a turn cancelled by `on_busy: interrupt` ends (turn_failed, INTERRUPTED). */
export const SUPERSEDED = 'The turn was interrupted by a newer turn (on_busy: interrupt).'

export interface AdmissionDeps {
  sessions: LiveSessions
  replicas?: ReplicaLink | undefined
  /** This process's interrupt of a session (what a routed interrupt falls back to). */
  interruptHere: (tenant: string, id: string) => Promise<InterruptResult>
  refuseWhenShuttingDown: () => void
}

/** Work admitted on a session: it holds the session's slot and gives it up with `release` (once; later calls do nothing). */
export type Admitted<T> = (session: LiveSession, release: () => void) => Promise<T>

/**
 * Runs `run` holding the session's turn slot, as the request's busy policy says (docs/api.md, "The
 * busy policy"): `reject` takes a free slot or answers SESSION_BUSY; `queue` waits in line, in
 * order; `interrupt` cancels the work that holds the slot and goes first. When another replica
 * runs a turn on the session (its lease), `queue` and `interrupt` (which first routes an interrupt
 * there) try again as that lease ends; their order across replicas is the order they win the lease.
 * `onQueued` is told once, when the request has to wait: its place in this replica's line, or null
 * behind another replica.
 */
export async function admitted<T>(
  deps: AdmissionDeps,
  tenant: string,
  id: string,
  policy: OnBusy,
  onQueued: ((position: number | null) => void) | undefined,
  run: Admitted<T>,
  /** Checks the request before it waits or interrupts anything: a request that would be refused then is refused now. */
  precheck?: (session: LiveSession) => void,
): Promise<T> {
  let told = false
  const queued = (position: number | null) => {
    if (!told) onQueued?.(position)
    told = true
  }
  const deadline = Date.now() + ELSEWHERE_WAIT_MS
  let pause = ELSEWHERE_FIRST_PAUSE_MS
  let interruptedElsewhere = false
  for (;;) {
    const session = await deps.sessions.get(tenant, id)
    if (policy !== 'reject') precheck?.(session)
    if (policy === 'interrupt') session.running?.signal.abort(new BurrowError('INTERRUPTED', SUPERSEDED))
    if (policy === 'reject') {
      if (!session.slot.tryTake()) throw new BurrowError('SESSION_BUSY', `A turn is already running on session ${id}.`)
    } else await session.slot.take({ limit: MAX_QUEUED_TURNS, front: policy === 'interrupt', onQueued: queued })
    let held = true
    const release = () => {
      if (held) session.slot.release()
      held = false
    }
    try {
      deps.refuseWhenShuttingDown()
      // Loaded again while this request waited (a failed write): it lines up on the session as it now is.
      if ((await deps.sessions.get(tenant, id)) !== session) continue
      return await run(session, release)
    } catch (err) {
      if (policy === 'reject' || !leasedElsewhere(err) || Date.now() > deadline) throw err
    } finally {
      release()
    }
    queued(null)
    if (policy === 'interrupt' && !interruptedElsewhere && deps.replicas) {
      interruptedElsewhere = true
      await deps.replicas.interrupt(tenant, id, () => deps.interruptHere(tenant, id))
    }
    await new Promise((r) => setTimeout(r, pause))
    pause = Math.min(2 * pause, ELSEWHERE_MAX_PAUSE_MS)
  }
}

/** SESSION_BUSY because another replica holds the session's lease (replicas/lease-keeper.ts). */
function leasedElsewhere(err: unknown): boolean {
  return err instanceof BurrowError && err.code === 'SESSION_BUSY' && err.data?.reason === 'leased_elsewhere'
}
