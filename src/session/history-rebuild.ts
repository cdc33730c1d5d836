import { SUMMARY_PREFIX } from '../core/compactor.js'
import { checkHistory, isToolResultMessage, textOf, toolUsesOf, type ContentBlock, type Message } from '../core/messages.js'

/** A turn starts at a user message that is not a tool-results message (docs/guarantees.md, Compaction). */
export function isTurnStart(m: Message): boolean {
  return m.role === 'user' && !isToolResultMessage(m)
}

/** True when a history segment is a finished turn: it ends with an assistant message that calls no tool. */
function isComplete(messages: readonly Message[], from: number, to: number): boolean {
  const last = messages[to - 1]
  return to > from && last !== undefined && last.role === 'assistant' && toolUsesOf(last).length === 0
}

export type RebuildPlan = { keepFrom: number } | { reason: string }

/**
 * Where the kept part of a history begins: the turn in progress (if any) plus the last
 * `budget` complete turns; everything before is discarded. Turns are never split.
 */
export function planRebuild(messages: readonly Message[], budget: number): RebuildPlan {
  const starts: number[] = []
  for (let i = 0; i < messages.length; i++) if (isTurnStart(messages[i]!)) starts.push(i)
  if (starts.length === 0) return { reason: 'the history has no turn to keep or discard' }
  let keep = 0
  let end = messages.length
  let idx = starts.length - 1
  // The turn in progress (not complete) is always kept: the model still has to answer it.
  if (!isComplete(messages, starts[idx]!, end)) {
    end = starts[idx]!
    idx--
    keep++
  }
  let kept = 0
  while (idx >= 0 && kept < budget) {
    end = starts[idx]!
    idx--
    kept++
  }
  const keepFrom = keep + kept === 0 ? messages.length : end
  if (keepFrom === 0) return { reason: 'every turn of the history is within the recent-turn budget; nothing to discard' }
  if (starts[0]! > 0 && keepFrom <= starts[0]!) return { reason: 'nothing before the first turn can be discarded' }
  if (messages.slice(0, keepFrom).every(isSummaryMessage))
    return { reason: 'only the previous summary would be discarded; nothing new to summarise' }
  return { keepFrom }
}

/** The message a previous compaction injected. */
export function isSummaryMessage(m: Message): boolean {
  return m.role === 'user' && m.content.length === 1 && m.content[0]!.type === 'text' && m.content[0]!.text.startsWith(SUMMARY_PREFIX)
}

/** Checks a rebuilt history against the original; returns the broken invariant, or null. */
export function checkRebuild(
  original: readonly Message[],
  keepFrom: number,
  rebuilt: readonly Message[],
  discarded: readonly Message[],
): string | null {
  const summary = rebuilt[0]
  if (!summary || summary.role !== 'user' || !textOf(summary.content).startsWith(SUMMARY_PREFIX))
    return 'the rebuilt history does not start with the summary message'
  if (discarded.length + rebuilt.length - 1 !== original.length)
    return 'messages were lost or duplicated between the history and the discarded part'
  for (let i = 0; i < discarded.length; i++) if (discarded[i] !== original[i]) return `discarded message ${i} is out of order`
  for (let i = 1; i < rebuilt.length; i++) if (rebuilt[i] !== original[keepFrom + i - 1]) return `kept message ${i} is out of order`
  const first = rebuilt[1]
  if (first && !isTurnStart(first)) return 'the kept part does not start at a turn: a turn was split'
  const problem = checkHistory(rebuilt)
  if (problem) return `the rebuilt history is not valid for a provider: ${problem.problem} (message ${problem.index})`
  return null
}

const BASE64_RUN = /[A-Za-z0-9+/=]{512,}/g

/**
 * A copy of the history fit for a summary call: images become short placeholders, long
 * base64 runs are elided, and very long texts are cut in the middle (the summary needs the
 * gist, not the bytes). The session's own history is never changed.
 */
export function prepareForSummarization(messages: readonly Message[], maxBlockChars = 20_000): Message[] {
  const text = (t: string) => {
    let s = t.replace(BASE64_RUN, (m) => `[base64 data, ${m.length} chars omitted]`)
    if (s.length > maxBlockChars) {
      const half = Math.floor(maxBlockChars / 2)
      s = `${s.slice(0, half)}\n[… ${s.length - 2 * half} chars omitted …]\n${s.slice(-half)}`
    }
    return s
  }
  const block = (b: ContentBlock): ContentBlock => {
    switch (b.type) {
      case 'text':
        return { type: 'text', text: text(b.text) }
      case 'image':
        return {
          type: 'text',
          text:
            b.source.type === 'url' ? `[image: ${b.source.url}]` : `[image: ${b.source.media_type}, ${b.source.data.length} base64 chars]`,
        }
      case 'tool_result': {
        const content = typeof b.content === 'string' ? text(b.content) : b.content.map((c) => block(c) as { type: 'text'; text: string })
        return { ...b, content }
      }
      case 'tool_use': {
        const json = JSON.stringify(b.input ?? {})
        return json.length > maxBlockChars ? { ...b, input: { omitted: `${json.length} chars of arguments` } } : b
      }
    }
  }
  return messages.map((m) => ({ role: m.role, content: m.content.map(block) }))
}

/**
 * Splits a history into chunks of at most `maxChars` (JSON) for summaries made in several
 * calls. An assistant message and the tool results answering it stay together, so every
 * chunk is a valid conversation; a unit larger than the limit is a chunk of its own.
 */
export function chunkHistory(messages: readonly Message[], maxChars: number): Message[][] {
  const units: Message[][] = []
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!
    const next = messages[i + 1]
    if (m.role === 'assistant' && toolUsesOf(m).length > 0 && next && isToolResultMessage(next)) {
      units.push([m, next])
      i++
    } else units.push([m])
  }
  const chunks: Message[][] = []
  let current: Message[] = []
  let size = 0
  for (const u of units) {
    const n = u.reduce((a, m) => a + JSON.stringify(m).length, 0)
    if (current.length > 0 && size + n > maxChars) {
      chunks.push(current)
      current = []
      size = 0
    }
    current.push(...u)
    size += n
  }
  if (current.length > 0) chunks.push(current)
  return chunks
}
