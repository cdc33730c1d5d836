// Shared types and helpers of the fake LLM server (see ../fake-llm-server.ts).

export type FakeApi = 'openai' | 'anthropic'

export interface FakeToolCall {
  id?: string
  name: string
  input: unknown
  /** send these raw argument chars instead of JSON.stringify(input) */
  rawArguments?: string
}

export interface FakeStep {
  /** only consumed by a request to this API (default: any) */
  api?: FakeApi
  /** assistant text, streamed in chunks of `chunkSize` chars */
  text?: string
  /** chars per streamed text / argument fragment (default 8) */
  chunkSize?: number
  toolCalls?: FakeToolCall[]
  usage?: { input_tokens: number; output_tokens: number }
  stopReason?: string
  /** answer this HTTP status (>= 400) with an API-shaped error body instead */
  status?: number
  errorMessage?: string
  headers?: Record<string, string>
  hang?: 'headers' | 'body'
  malformed?: 'bad_json' | 'truncated' | 'no_terminator'
  delayMs?: number
}

export interface RecordedRequest {
  api: FakeApi
  path: string
  headers: Record<string, string | string[] | undefined>
  /** parsed JSON body, or the raw string if it was not JSON */
  body: any
  /** why the server rejected the request (validation / auth), if it did */
  rejected?: string
  /** the scripted step that answered it (absent for echo answers and rejections) */
  step?: FakeStep
  /** HTTP status sent (absent while the answer is pending or hanging before headers) */
  status?: number
}

/** A step with every default filled in, ready to be rendered in one API's wire format. */
export interface ResolvedStep {
  text: string | undefined
  toolCalls: Array<{ id: string; name: string; input: unknown; args: string }>
  usage: { input_tokens: number; output_tokens: number }
  stopReason: string
  chunkSize: number
}

/** A request the real API would refuse with 400 `invalid_request_error`. */
export class FakeRequestError extends Error {
  constructor(
    message: string,
    readonly param: string | null = null,
  ) {
    super(message)
  }
}

/** What a route module renders for one resolved step. */
export interface Rendered {
  json: unknown
  /** complete SSE frames (each ends with a blank line) */
  frames: string[]
  /** the frames that mark a proper end of stream ([DONE] / message_stop) */
  terminator: string[]
  /** a frame whose data line is not valid JSON (for malformed: 'bad_json') */
  badFrame: string
}

export function isObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

export function typeName(v: unknown): string {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'array'
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number'
  return typeof v === 'string' ? 'string' : typeof v === 'boolean' ? 'boolean' : 'object'
}

/** Split `s` into pieces of at most `size` chars; at least two pieces if `s` has 2+ chars. */
export function fragments(s: string, size: number): string[] {
  if (s.length === 0) return []
  const n = s.length > 1 ? Math.max(1, Math.min(size, Math.ceil(s.length / 2))) : 1
  const out: string[] = []
  for (let i = 0; i < s.length; i += n) out.push(s.slice(i, i + n))
  return out
}

export function chunks(s: string, size: number): string[] {
  const out: string[] = []
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size))
  return out
}

export function resolveStep(
  step: FakeStep,
  opts: {
    rawBodyLength: number
    newToolId: () => string
    stopDefaults: { text: string; tools: string }
  },
): ResolvedStep {
  const toolCalls = (step.toolCalls ?? []).map((c) => ({
    id: c.id ?? opts.newToolId(),
    name: c.name,
    input: c.input,
    args: c.rawArguments ?? JSON.stringify(c.input ?? {}),
  }))
  const text = step.text
  return {
    text,
    toolCalls,
    usage: step.usage ?? {
      input_tokens: Math.ceil(opts.rawBodyLength / 4),
      output_tokens: Math.ceil((text ?? '').length / 4) + 10 * toolCalls.length,
    },
    stopReason: step.stopReason ?? (toolCalls.length > 0 ? opts.stopDefaults.tools : opts.stopDefaults.text),
    chunkSize: Math.max(1, step.chunkSize ?? 8),
  }
}
