import { BurrowError } from '../core/errors.js'
import type { Logger } from '../core/logger.js'
import type { MemoryStore, NewMemoryEntry } from '../core/memory-store.js'
import type { Message } from '../core/messages.js'
import { isSummaryMessage } from './history-rebuild.js'
import type { CommittedBatch, SessionListener } from './session-listener.js'

/** Text from a message that is worth remembering (tool results of the memory tools themselves are not). */
export interface DiscardedBatch {
  tenant: string
  sessionId: string
  messages: readonly Message[]
  seqs: readonly number[]
  turns: readonly number[]
}

const NOT_INDEXED_TOOLS = new Set(['memory_search', 'note_set', 'note_delete'])

export interface MemoryIndexerOptions {
  /** How often parked batches check whether the store takes writes again (ms). */
  retryEveryMs?: number
  /** Parked batches kept at most; past it the oldest is dropped (and logged). */
  maxParked?: number
}

/** Told of each batch written into memory, with how many entries it added (the service records `memory_indexed`). */
export type IndexedListener = (tenant: string, sessionId: string, entries: number) => Promise<void>

/**
 * Indexes what compaction discards, off the turn's path: one queue, worked in order. It is
 * a commit listener: a committed `compaction_completed` of a session with memory on brings
 * the messages it discarded.
 * User, assistant and tool-result text become passages with their session, turn and seq;
 * summaries and the memory tools' own output (injected context) do not. A turn never
 * waits for this, and nothing here fails a turn: errors are logged. `idle()` lets a
 * shutdown wait.
 *
 * A batch the store cannot write (`STORE_UNAVAILABLE`: disk full, I/O error) is parked,
 * not dropped: the messages are only in the session's log now, and memory should recall
 * them once the disk is back. Parked batches are retried as soon as the store reports
 * itself healthy again (checked every `retryEveryMs`, which also lets the store probe),
 * at most `maxParked` of them — beyond that the oldest is dropped with an error naming
 * its session and seqs. They do not hold a shutdown: whatever is still parked then stays
 * unindexed (the log has it verbatim). A batch whose session was deleted meanwhile is
 * refused by the store and dropped. Any other failure is logged and the batch dropped.
 */
export class MemoryIndexer implements SessionListener {
  private readonly queue: DiscardedBatch[] = []
  private readonly listeners: IndexedListener[] = []
  private readonly parked: DiscardedBatch[] = []
  private working: Promise<void> | null = null
  private retryTimer: NodeJS.Timeout | null = null
  private readonly retryEveryMs: number
  private readonly maxParked: number

  constructor(
    private readonly store: MemoryStore,
    private readonly split: (text: string) => string[],
    private readonly logger: Logger,
    opts: MemoryIndexerOptions = {},
  ) {
    this.retryEveryMs = opts.retryEveryMs ?? 1000
    this.maxParked = opts.maxParked ?? 256
  }

  /** Listens for what gets indexed; each listener is awaited before the next batch (so `idle()` covers it). */
  onIndexed(listener: IndexedListener): void {
    this.listeners.push(listener)
  }

  committed({ session, discarded }: CommittedBatch): void {
    if (!discarded || discarded.messages.length === 0 || !session.record.config.memory) return
    this.enqueue({ tenant: session.tenant, sessionId: session.id, ...discarded })
  }

  enqueue(batch: DiscardedBatch): void {
    this.queue.push(batch)
    this.working ??= this.drain().finally(() => {
      this.working = null
    })
  }

  async idle(): Promise<void> {
    while (this.working) await this.working
  }

  /** Batches waiting for the store to take writes again. */
  get parkedBatches(): number {
    return this.parked.length
  }

  private async drain(): Promise<void> {
    for (let b = this.queue.shift(); b; b = this.queue.shift()) {
      let added = false
      try {
        const entries = this.entriesOf(b)
        if (entries.length === 0) continue
        await this.store.add(entries)
        added = true
        if (this.parked.length > 0) this.unpark()
        for (const l of this.listeners) await l(b.tenant, b.sessionId, entries.length)
      } catch (err) {
        // Only a failed add is retried: once added, a retry would store the passages twice.
        const code = err instanceof BurrowError ? err.code : undefined
        if (!added && code === 'STORE_UNAVAILABLE') this.park(b, err as BurrowError)
        else if (!added && code === 'SESSION_NOT_FOUND')
          this.logger.debug({ session_id: b.sessionId }, 'session deleted before its discarded messages were indexed')
        else this.logger.error({ err, session_id: b.sessionId }, 'indexing discarded messages into memory failed')
      }
    }
  }

  private park(b: DiscardedBatch, err: BurrowError): void {
    this.parked.push(b)
    this.logger.warn(
      { err, session_id: b.sessionId, parked: this.parked.length },
      'memory is not writable: the discarded messages are indexed once it is',
    )
    if (this.parked.length > this.maxParked) {
      const dropped = this.parked.shift()!
      this.logger.error(
        { session_id: dropped.sessionId, seqs: [dropped.seqs[0], dropped.seqs.at(-1)] },
        'too many discarded batches wait for memory: the oldest is dropped (its messages stay in the session log)',
      )
    }
    if (!this.retryTimer) {
      this.retryTimer = setInterval(() => {
        if (this.store.healthy()) this.unpark()
      }, this.retryEveryMs)
      // Parked work never keeps a process alive that is otherwise done.
      this.retryTimer.unref()
    }
  }

  private unpark(): void {
    if (this.retryTimer) clearInterval(this.retryTimer)
    this.retryTimer = null
    for (const b of this.parked.splice(0)) this.enqueue(b)
  }

  entriesOf(b: DiscardedBatch): NewMemoryEntry[] {
    const toolNames = new Map<string, string>()
    const out: NewMemoryEntry[] = []
    b.messages.forEach((m, i) => {
      if (isSummaryMessage(m)) return
      const texts: string[] = []
      for (const block of m.content) {
        if (block.type === 'text') texts.push(block.text)
        else if (block.type === 'tool_use') toolNames.set(block.id, block.name)
        else if (block.type === 'tool_result' && !NOT_INDEXED_TOOLS.has(toolNames.get(block.tool_use_id) ?? '')) {
          const t =
            typeof block.content === 'string' ? block.content : block.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n')
          texts.push(t)
        }
      }
      for (const text of texts) {
        for (const passage of this.split(text)) {
          out.push({ tenant: b.tenant, content: passage, session_id: b.sessionId, turn: b.turns[i] ?? null, seq: b.seqs[i] ?? null })
        }
      }
    })
    return out
  }
}
