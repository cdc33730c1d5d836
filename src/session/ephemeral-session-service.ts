import { BurrowError } from '../core/errors.js'
import type { EventEnvelope } from '../core/events.js'
import type { SessionRecord } from '../core/session-record.js'
import type { CallContext } from '../core/session-service.js'
import type { Page, SessionQuery, SessionSummary, SessionView, StartTurn, TurnResult } from '../core/wire.js'
import { BaseSessionService } from './base-session-service.js'
import type { CommitFn } from './live-session.js'

const noCommit: CommitFn = () => {}

/**
 * Sessions in process memory only (no `session-store`): create, turns, interrupt and
 * live streams work; every persistence operation refuses with
 * `SESSION_PERSISTENCE_DISABLED`. Replay comes from the bounded per-session buffer.
 */
export class EphemeralSessionService extends BaseSessionService {
  protected commitFn(): CommitFn { return noCommit }
  protected async loadRecord(): Promise<SessionRecord | undefined> { return undefined }
  protected async storedEvents(): Promise<EventEnvelope[]> { return [] }

  private disabled(ctx: CallContext): never {
    this.authenticate(ctx)
    throw new BurrowError('SESSION_PERSISTENCE_DISABLED')
  }

  async read(_id: string, ctx: CallContext): Promise<SessionView> { return this.disabled(ctx) }
  async list(_q: SessionQuery, ctx: CallContext): Promise<Page<SessionSummary>> { return this.disabled(ctx) }
  async archive(_id: string, ctx: CallContext): Promise<void> { return this.disabled(ctx) }
  async delete(_id: string, ctx: CallContext): Promise<void> { return this.disabled(ctx) }
  async resume(_id: string, _req: StartTurn, ctx: CallContext): Promise<TurnResult> { return this.disabled(ctx) }
}
