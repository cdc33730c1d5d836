import { BurrowError } from '../core/errors.js'
import type { ContentBlock, ImageBlock, Message, TextBlock } from '../core/messages.js'

export function malformed(provider: string, what: string): BurrowError {
  return new BurrowError('PROVIDER_ERROR', `${provider} sent a malformed stream: ${what}`, { provider })
}

export function parseJson(provider: string, text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    throw malformed(provider, `invalid JSON ${JSON.stringify(text.slice(0, 120))}`)
  }
}

/** Parses streamed tool arguments; an empty string means no arguments. */
export function parseToolInput(text: string): { ok: true; value: unknown } | { ok: false } {
  if (text.trim() === '') return { ok: true, value: {} }
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch {
    return { ok: false }
  }
}

/** Token estimate for providers that report no usage: JSON bytes / 4. */
export function estimateTokens(v: unknown): number {
  const s = typeof v === 'string' ? v : JSON.stringify(v)
  return Math.ceil(s.length / 4)
}

/**
 * Prepares a canonical history for strict providers: drops messages with no content,
 * merges consecutive messages of one role (tool results first in a user message).
 */
export function normaliseHistory(messages: readonly Message[]): Message[] {
  const out: Message[] = []
  for (const m of messages) {
    const content = m.content.filter((b) => !(b.type === 'text' && b.text === ''))
    if (content.length === 0) continue
    const last = out[out.length - 1]
    if (last && last.role === m.role) {
      const merged = [...last.content, ...content]
      last.content =
        m.role === 'user' ? [...merged.filter((b) => b.type === 'tool_result'), ...merged.filter((b) => b.type !== 'tool_result')] : merged
    } else {
      out.push({ role: m.role, content: [...content] })
    }
  }
  return out
}

export function imageUrl(b: ImageBlock): string {
  return b.source.type === 'url' ? b.source.url : `data:${b.source.media_type};base64,${b.source.data}`
}

export function textOrPlaceholders(content: string | Array<TextBlock | ImageBlock>): string {
  if (typeof content === 'string') return content
  return content.map((b) => (b.type === 'text' ? b.text : '[image]')).join('\n')
}

export type { ContentBlock }
