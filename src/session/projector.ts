import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { EventEnvelope } from '../core/events.js'
import type { Logger } from '../core/logger.js'
import type { SessionRepository } from '../core/stores.js'
import { toView } from '../core/views.js'
import type { CommittedBatch, CommittedSession, SessionListener } from './session-listener.js'
import { renderEvent } from './transcript.js'

/**
 * The projection (docs/guarantees.md, Durability): an async worker that tails the event log and keeps
 * `sessions/<id>/session.json` and `sessions/<id>/transcript.md` under the data dir.
 * Files are written atomically (temp file + rename), a checkpoint per session records
 * how far they go, and they are never read back as a source of truth. Commits only
 * mark sessions (it is a commit listener); the work happens later, off the turn's path.
 *
 * A projector that is not writing (the projection off, or a replica that is not the elected
 * writer: docs/scaling.md, The projection) writes nothing and keeps nothing of the commits it
 * hears of; a deletion still removes whatever files its directory holds for the session.
 */
export class Projector implements SessionListener {
  private readonly dirty = new Set<string>()
  private timer: NodeJS.Timeout | null = null
  private working: Promise<void> | null = null
  private closed = false
  private forcing = false
  private writing: boolean
  /** When each session may be projected again: a busy session waits `minIntervalMs`, or 20× its last projection's time. */
  private readonly nextAt = new Map<string, number>()
  private readonly root: string
  /**
   * Committed events not yet projected, per session, so the projector rarely reads the log back.
   * Bounded per session and in all: past a bound, a session's events are read from the log instead.
   */
  private readonly recent = new Map<string, EventEnvelope[]>()
  private recentCount = 0

  /** The sessions of the commits not yet projected: their live record saves loading it from the store. */
  private readonly sessions = new Map<string, CommittedSession>()

  private readonly opts: ProjectorOptions

  constructor(
    private readonly repo: SessionRepository,
    dataDir: string,
    private readonly logger: Logger,
    opts: Partial<ProjectorOptions> = {},
  ) {
    this.root = join(dataDir, 'sessions')
    this.opts = { ...PROJECTOR_DEFAULTS, ...opts }
    this.writing = this.opts.writing
  }

  /** Picks up what a previous process committed but did not project. */
  async start(): Promise<void> {
    await this.catchUp()
  }

  /** Marks every session the store says is pending: what this process did not hear of (another replica's commits, a deletion there). */
  async catchUp(): Promise<void> {
    if (!this.writing || this.closed) return
    const pending = await this.repo.projection.pending()
    if (!this.writing) return // stopped meanwhile
    for (const id of pending) this.dirty.add(id)
    this.schedule()
  }

  /** Whether this process writes the files from now on: when it starts, it catches up from the store's checkpoints. */
  async setWriting(on: boolean): Promise<void> {
    if (on === this.writing) return
    this.writing = on
    if (on) return this.catchUp()
    // Whatever is under way finishes (one session); nothing more is written, nothing kept.
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
    this.dirty.clear()
    this.sessions.clear()
    this.nextAt.clear()
    this.recent.clear()
    this.recentCount = 0
  }

  committed(batch: CommittedBatch): void {
    if (this.closed || !this.writing) return
    this.sessions.set(batch.session.id, batch.session)
    this.notify(batch.session.id, batch.events)
  }

  deleted(sessionId: string): Promise<void> {
    return this.remove(sessionId)
  }

  /** Told after each commit, with the events it stored. */
  notify(sessionId: string, events: readonly EventEnvelope[]): void {
    if (this.closed || !this.writing) return
    if (events.length > 0) {
      const list = this.recent.get(sessionId)
      if ((list?.length ?? 0) + events.length > this.opts.recentPerSession || this.recentCount + events.length > this.opts.recentTotal) {
        this.forgetRecent(sessionId) // fallen far behind: read the log instead
      } else {
        if (list) for (const e of events) list.push(e)
        else this.recent.set(sessionId, events.slice())
        this.recentCount += events.length
      }
    }
    this.dirty.add(sessionId)
    this.schedule()
  }

  /** Resolves when every session marked so far is projected. */
  async idle(): Promise<void> {
    this.forcing = true
    try {
      for (;;) {
        if (this.timer) {
          clearTimeout(this.timer)
          this.timer = null
        }
        if (this.dirty.size > 0 && !this.working) this.kick()
        if (!this.working) return
        await this.working
      }
    } finally {
      this.forcing = false
    }
  }

  async remove(sessionId: string): Promise<void> {
    this.dirty.delete(sessionId)
    this.sessions.delete(sessionId)
    this.forgetRecent(sessionId)
    this.nextAt.delete(sessionId)
    await this.working
    await rm(join(this.root, sessionId), { recursive: true, force: true })
  }

  /** Throws the files away and projects every session again from its log. */
  async rebuildAll(): Promise<void> {
    await this.idle()
    await rm(this.root, { recursive: true, force: true })
    await this.repo.projection.reset()
    for (const id of await this.repo.projection.pending()) this.dirty.add(id)
    this.kick()
    await this.idle()
  }

  async close(): Promise<void> {
    await this.idle()
    this.closed = true
  }

  private schedule(): void {
    if (this.timer || this.working || this.dirty.size === 0 || this.closed) return
    this.timer = setTimeout(() => {
      this.timer = null
      this.kick()
    }, this.opts.debounceMs)
    this.timer.unref()
  }

  private kick(): void {
    if (this.working) return
    this.working = this.drain().finally(() => {
      this.working = null
      this.schedule()
    })
  }

  private async drain(): Promise<void> {
    const later: string[] = []
    while (this.dirty.size > 0 && this.writing) {
      const id = this.dirty.values().next().value as string
      this.dirty.delete(id)
      // Files are rewritten whole, so a busy session is projected at most once per interval, and a long one
      // (whose files take longer to write) less often: the projection stays a small, bounded share of the CPU.
      if (!this.forcing && Date.now() < (this.nextAt.get(id) ?? 0)) {
        later.push(id)
        continue
      }
      try {
        const t0 = performance.now()
        await this.project(id)
        // Told again meanwhile, it is dirty again and keeps the session; else its record is not needed.
        if (!this.dirty.has(id)) this.sessions.delete(id)
        const took = performance.now() - t0
        this.nextAt.set(id, Date.now() + Math.max(this.opts.minIntervalMs, 20 * took))
        if (this.nextAt.size > 10_000) this.nextAt.delete(this.nextAt.keys().next().value as string)
        // A duty cycle for the worker as a whole: under load the projection falls behind (it is
        // asynchronous by design) rather than taking more than about a tenth of the process.
        if (!this.forcing) await new Promise<void>((r) => setTimeout(r, 9 * took))
      } catch (err) {
        // A full disk or a store refusing writes: the files and the checkpoint are rewritten whole later,
        // so trying again is always safe; the pending mark in the store survives a restart meanwhile.
        this.logger.warn({ err, session_id: id }, `projection failed; retrying in ${this.opts.retryMs} ms`)
        setTimeout(() => {
          if (!this.closed && this.writing) {
            this.dirty.add(id)
            this.schedule()
          }
        }, this.opts.retryMs).unref()
      }
    }
    if (this.writing) for (const id of later) this.dirty.add(id)
  }

  private async project(id: string): Promise<void> {
    const live = this.sessions.get(id)
    // A broken session's record may be ahead of the log: the store is the truth then.
    const record = live && !live.broken ? live.record : await this.repo.sessions.get(id)
    const dir = join(this.root, id)
    if (!record) {
      // Deleted (maybe through another replica, which left a mark for whoever holds the files).
      await rm(dir, { recursive: true, force: true })
      await this.repo.projection.removed?.(id)
      return
    }
    // Taken now, in one synchronous step: a live record keeps changing while the files are written.
    const lastSeq = record.last_seq
    const json = `${JSON.stringify(toView(record, false, true), null, 2)}\n`
    let from = await this.repo.projection.checkpoint(id)
    if (from >= lastSeq) {
      await this.repo.projection.projected(id, lastSeq)
      return
    }
    const transcriptPath = join(dir, 'transcript.md')
    let transcript = ''
    if (from > 0) {
      try {
        transcript = await readFile(transcriptPath, 'utf8')
      } catch {
        from = 0
      } // missing file: start over
    }
    await mkdir(dir, { recursive: true })
    for (const e of await this.eventsBetween(id, from, lastSeq)) transcript += renderEvent(e)
    await atomicWrite(transcriptPath, transcript)
    await atomicWrite(join(dir, 'session.json'), json)
    await this.repo.projection.projected(id, lastSeq)
  }

  /** Stored events in `(from, upTo]`: those notified since the last projection, then the log for whatever they miss. */
  private async eventsBetween(id: string, from: number, upTo: number): Promise<EventEnvelope[]> {
    const list = this.recent.get(id) ?? []
    let i = 0
    while (i < list.length && list[i]!.seq <= from) i++
    const out: EventEnvelope[] = []
    // Usable only if they start right after the checkpoint (a restart or the bound leaves a gap).
    if (i < list.length && list[i]!.seq === from + 1) for (; i < list.length && list[i]!.seq <= upTo; i++) out.push(list[i]!)
    const covered = out.length > 0 ? out[out.length - 1]!.seq : from
    if (covered < upTo) for (const e of await this.repo.events.readAfter(id, covered, upTo)) out.push(e)
    // What is projected now is not needed again.
    const rest = this.recent.get(id)
    if (rest) {
      let j = 0
      while (j < rest.length && rest[j]!.seq <= upTo) j++
      if (j === rest.length) this.forgetRecent(id)
      else {
        rest.splice(0, j)
        this.recentCount -= j
      }
    }
    return out
  }

  private forgetRecent(id: string): void {
    const list = this.recent.get(id)
    if (!list) return
    this.recentCount -= list.length
    this.recent.delete(id)
  }
}

export interface ProjectorOptions {
  /** Wait after a commit before projecting, so a burst of commits is projected once. */
  debounceMs: number
  /** A session is projected at most this often (or every 20× its last projection's time, if longer). */
  minIntervalMs: number
  /** Committed events kept in memory for the next projection, per session and in all; past them, the log is read. */
  recentPerSession: number
  recentTotal: number
  /** A session whose projection failed is tried again after this long. */
  retryMs: number
  /** Whether it writes from the start (else once `setWriting(true)`). */
  writing: boolean
}

export const PROJECTOR_DEFAULTS: ProjectorOptions = {
  debounceMs: 100,
  minIntervalMs: 1000,
  recentPerSession: 4096,
  recentTotal: 65_536,
  retryMs: 5000,
  writing: true,
}

async function atomicWrite(path: string, content: string): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`
  await writeFile(tmp, content)
  await rename(tmp, path)
}
