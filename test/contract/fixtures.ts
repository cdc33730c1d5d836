// Builds realistic event logs and the snapshots they produce, through the real reducer,
// so store suites commit exactly what the service would.
import type { EventEnvelope, EventType, EventData } from '../../src/core/events.js'
import type { SessionConfig, SessionRecord } from '../../src/core/session-record.js'
import { applyEvent } from '../../src/session/session-reducer.js'

let clock = Date.parse('2026-01-01T00:00:00.000Z')
const at = () => new Date(clock++).toISOString()

export function sessionId(n: number): string {
  // UUIDv7-shaped, ordered by n.
  const hex = n.toString(16).padStart(12, '0')
  return `01900000-0000-7000-8000-${hex}`
}

export function config(tenant = 'tenant-a', extra: Partial<SessionConfig> = {}): SessionConfig {
  return {
    tenant,
    model: 'offline:echo',
    system_prompt: '',
    metadata: {},
    memory: false,
    compaction: null,
    tools: [],
    max_total_tokens: null,
    ...extra,
  }
}

/** A session under construction: `add` returns the events of one commit and the record after it. */
export class SessionLog {
  record: SessionRecord | undefined
  readonly events: EventEnvelope[] = []
  constructor(
    readonly id: string,
    readonly cfg: SessionConfig = config(),
  ) {}

  add(turn: number, ...items: Array<{ type: EventType; data: unknown }>): { events: EventEnvelope[]; record: SessionRecord } {
    const out: EventEnvelope[] = []
    for (const it of items) {
      const e = {
        seq: (this.record?.last_seq ?? 0) + 1,
        session_id: this.id,
        turn,
        type: it.type,
        at: at(),
        data: it.data,
      } as EventEnvelope
      this.record = applyEvent(this.record, e)
      out.push(e)
    }
    this.events.push(...out)
    return { events: out, record: structuredClone(this.record!) }
  }

  create() {
    return this.add(0, { type: 'session_created', data: { config: this.cfg } satisfies EventData['session_created'] })
  }

  /** One complete turn: user input, an assistant answer, completion. */
  turn(text: string) {
    const turn = (this.record?.turn_count ?? 0) + 1
    return this.add(
      turn,
      { type: 'turn_started', data: { input: [{ type: 'text', text }], continuation: false } },
      {
        type: 'assistant_message',
        data: {
          message: { role: 'assistant', content: [{ type: 'text', text: `echo: ${text}` }] },
          usage: { input_tokens: 10, output_tokens: 3 },
          stop_reason: 'end_turn',
          model: 'offline:echo',
          step: 1,
          client_tool_call_ids: [],
        },
      },
      {
        type: 'turn_completed',
        data: { output_text: `echo: ${text}`, usage: { input_tokens: 10, output_tokens: 3 }, stop_reason: 'end_turn' },
      },
    )
  }

  /** A turn left running (started, nothing more). */
  startTurn(text: string) {
    const turn = (this.record?.turn_count ?? 0) + 1
    return this.add(turn, { type: 'turn_started', data: { input: [{ type: 'text', text }], continuation: false } })
  }

  /** A turn paused on a client tool call. */
  pausedTurn(text: string) {
    const turn = (this.record?.turn_count ?? 0) + 1
    return this.add(
      turn,
      { type: 'turn_started', data: { input: [{ type: 'text', text }], continuation: false } },
      {
        type: 'assistant_message',
        data: {
          message: { role: 'assistant', content: [{ type: 'tool_use', id: `call_${turn}`, name: 'lookup', input: {} }] },
          usage: { input_tokens: 5, output_tokens: 5 },
          stop_reason: 'tool_use',
          model: 'offline:echo',
          step: 1,
          client_tool_call_ids: [`call_${turn}`],
        },
      },
      { type: 'tool_call', data: { id: `call_${turn}`, name: 'lookup', input: {}, executor: 'client' } },
      { type: 'turn_requires_action', data: { tool_calls: [{ id: `call_${turn}`, name: 'lookup', input: {} }] } },
    )
  }

  archive() {
    return this.add(this.record!.turn_count, { type: 'session_archived', data: {} })
  }
}
