import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js'
import type { ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js'
import type { EventEnvelope } from '../../core/events.js'

/** What the MCP SDK hands a tool call besides its arguments. */
export type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>

/**
 * MCP progress notifications for a turn, when the client sent a progressToken: one per
 * batch of text deltas (those arriving in one event-loop turn; the message is the text so
 * far, its last 1000 characters) and one per tool call, tool result or compaction; one when the
 * turn waits in the session's line (`on_busy: queue`).
 */
export function progressReporter(
  extra: Extra,
): { onEvent(e: EventEnvelope): void; onQueued(position: number | null): void; done(): Promise<void> } | undefined {
  const token = extra._meta?.progressToken
  if (token === undefined) return undefined
  let progress = 0
  let text = ''
  let textPending = false
  let timer: NodeJS.Immediate | undefined
  let chain = Promise.resolve()
  const send = (message: string) => {
    const params = { progressToken: token, progress: ++progress, message }
    chain = chain.then(() => extra.sendNotification({ method: 'notifications/progress', params })).catch(() => {})
  }
  const flush = () => {
    if (timer) clearImmediate(timer)
    timer = undefined
    if (textPending) send(text.length > 1000 ? `…${text.slice(-1000)}` : text)
    textPending = false
  }
  const data = (e: EventEnvelope) => e.data as Record<string, unknown>
  return {
    onEvent(e) {
      if (e.type === 'text_delta') {
        text += String(data(e).text ?? '')
        textPending = true
        timer ??= setImmediate(flush)
        return
      }
      const message =
        e.type === 'tool_call'
          ? `tool_call ${String(data(e).name)}`
          : e.type === 'tool_result'
            ? `tool_result ${String(data(e).name)}`
            : e.type === 'compaction_started'
              ? 'compacting history'
              : e.type === 'compaction_completed'
                ? 'history compacted'
                : undefined
      if (message === undefined) return
      flush()
      send(message)
    },
    onQueued(position) {
      send(position === null ? 'queued behind a turn on another replica' : `queued (position ${position})`)
    },
    async done() {
      flush()
      await chain
    },
  }
}
