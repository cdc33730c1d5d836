import type { Logger } from '../core/logger.js'
import type { MemoryStore, NewMemoryEntry } from '../core/memory-store.js'
import type { Message } from '../core/messages.js'
import { isSummaryMessage } from './history-rebuild.js'

/** Text from a message that is worth remembering (tool results of the memory tools themselves are not). */
export interface DiscardedBatch {
  tenant: string
  sessionId: string
  messages: readonly Message[]
  seqs: readonly number[]
  turns: readonly number[]
}

const NOT_INDEXED_TOOLS = new Set(['memory_search', 'note_set', 'note_delete'])

/**
 * Indexes what compaction discards, off the turn's path: one queue, worked in order.
 * User, assistant and tool-result text become passages with their session, turn and seq;
 * summaries and the memory tools' own output (injected context) do not. A turn never
 * waits for this; `idle()` lets a shutdown wait.
 */
export class MemoryIndexer {
  private readonly queue: DiscardedBatch[] = []
  private working: Promise<void> | null = null

  constructor(
    private readonly store: MemoryStore,
    private readonly split: (text: string) => string[],
    private readonly logger: Logger,
    /** Records `memory_indexed` on the session (if it still exists). */
    private readonly indexed: (tenant: string, sessionId: string, entries: number) => Promise<void>,
  ) {}

  enqueue(batch: DiscardedBatch): void {
    this.queue.push(batch)
    this.working ??= this.drain().finally(() => { this.working = null })
  }

  async idle(): Promise<void> {
    while (this.working) await this.working
  }

  private async drain(): Promise<void> {
    for (let b = this.queue.shift(); b; b = this.queue.shift()) {
      try {
        const entries = this.entriesOf(b)
        if (entries.length === 0) continue
        await this.store.add(entries)
        await this.indexed(b.tenant, b.sessionId, entries.length)
      } catch (err) {
        this.logger.error({ err, session_id: b.sessionId }, 'indexing discarded messages into memory failed')
      }
    }
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
          const t = typeof block.content === 'string' ? block.content : block.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n')
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
