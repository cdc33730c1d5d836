// In-process parts for the direct tests of the session layer: a live session over a recording
// commit path, and a scripted LLM client behind a provider registry (no network, no server).
import type { EventEnvelope } from '../../src/core/events.js'
import { BurrowError } from '../../src/core/errors.js'
import type { LlmClient, LlmDelta, LlmRequest, LlmResponse } from '../../src/core/llm.js'
import type { ContentBlock } from '../../src/core/messages.js'
import type { SessionConfig } from '../../src/core/session-record.js'
import { StaticProviderRegistry } from '../../src/providers/provider-registry.js'
import { LiveSession, type CommitFn } from '../../src/session/live-session.js'
import { applyEvent } from '../../src/session/session-reducer.js'
import { config as storeConfig, sessionId } from '../contract/fixtures.js'

export { sessionId }

export function sessionConfig(extra: Partial<SessionConfig> = {}): SessionConfig {
  return storeConfig('tenant-a', { model: 'scripted:model', ...extra })
}

/** A live session whose commits are recorded (and resolve at once, or as `commit` says) and whose publications are collected. */
export function liveSession(cfg: SessionConfig = sessionConfig(), opts: { id?: string; commit?: CommitFn; listened?: boolean } = {}) {
  const id = opts.id ?? sessionId(1)
  const created: EventEnvelope<'session_created'> = {
    seq: 1,
    session_id: id,
    turn: 0,
    type: 'session_created',
    at: new Date().toISOString(),
    data: { config: cfg },
  }
  const committed: EventEnvelope[] = []
  const published: EventEnvelope[] = []
  const commit: CommitFn =
    opts.commit ??
    ((events) => {
      committed.push(...events)
    })
  const session = new LiveSession(
    applyEvent(undefined, created),
    commit,
    (e) => published.push(e),
    () => opts.listened ?? false,
  )
  return { session, committed, published }
}

type Step = LlmResponse | BurrowError | ((req: LlmRequest) => Promise<LlmResponse>)

/** An LLM client answering from a script, one step per call; it records what it was sent. */
export class ScriptedClient implements LlmClient {
  readonly provider = 'scripted'
  readonly offline = true
  readonly defaultModel = 'scripted:model'
  readonly requests: Array<{ system: string | undefined; messages: unknown[]; tools: string[]; maxTokens: number }> = []

  constructor(private readonly steps: Step[] = []) {}

  push(...steps: Step[]): void {
    this.steps.push(...steps)
  }

  async complete(req: LlmRequest, onDelta?: (d: LlmDelta) => void): Promise<LlmResponse> {
    this.requests.push({
      system: req.system,
      messages: structuredClone([...req.messages]),
      tools: (req.tools ?? []).map((t) => t.name),
      maxTokens: req.maxTokens,
    })
    const step = this.steps.shift()
    if (!step) throw new Error('the script ran out')
    if (step instanceof BurrowError) throw step
    const resp = typeof step === 'function' ? await step(req) : step
    for (const b of resp.content) if (b.type === 'text') onDelta?.({ type: 'text', text: b.text })
    return resp
  }
}

export const say = (text: string, usage = { input_tokens: 10, output_tokens: 2 }): LlmResponse => ({
  content: [{ type: 'text', text }],
  usage,
  stopReason: 'end_turn',
})

export const call = (name: string, input: unknown, id = `call_${name}`, text?: string): LlmResponse => {
  const content: ContentBlock[] = [...(text ? [{ type: 'text' as const, text }] : []), { type: 'tool_use', id, name, input }]
  return { content, usage: { input_tokens: 10, output_tokens: 2 }, stopReason: 'tool_use' }
}

export const calls = (...uses: Array<{ id: string; name: string; input: unknown }>): LlmResponse => ({
  content: uses.map((u) => ({ type: 'tool_use' as const, ...u })),
  usage: { input_tokens: 10, output_tokens: 2 },
  stopReason: 'tool_use',
})

export function registry(client: LlmClient): StaticProviderRegistry {
  return new StaticProviderRegistry(
    [{ name: 'scripted', client, hint: 'nothing to set', defaultModel: 'scripted:model' }],
    'scripted:model',
  )
}

/** Records `n` complete turns on a live session, as the loop would (user text, an answer, completion). */
export function talk(
  session: LiveSession,
  n: number,
  text = (i: number) => `message ${i}`,
  usage = { input_tokens: 10, output_tokens: 2 },
): void {
  for (let i = 0; i < n; i++) {
    const turn = session.record.turn_count + 1
    session.emit(turn, [
      { type: 'turn_started', data: { input: [{ type: 'text', text: text(turn) }], continuation: false } },
      {
        type: 'assistant_message',
        data: {
          message: { role: 'assistant', content: [{ type: 'text', text: `answer ${turn}` }] },
          usage,
          stop_reason: 'end_turn',
          model: session.record.config.model,
          step: 1,
          client_tool_call_ids: [],
        },
      },
      { type: 'turn_completed', data: { output_text: `answer ${turn}`, usage, stop_reason: 'end_turn' } },
    ])
  }
}
