// Turns in flight across a SIGTERM, driven against a real Burrow process: turns of every kind
// (REST JSON over keep-alive sockets, REST SSE, JSON-RPC, MCP) are scripted on the fake LLM so
// that each answer ends at a chosen moment around the signal (or never), event subscribers
// listen, SIGTERM is sent, and everything each client received is collected for the caller
// to judge. No tap in here: the shutdown fault chapter (test/contract/shutdown-faults.contract.ts)
// asserts on the receipts, bench/shutdown-delivery.bench.ts counts them.
import { once } from 'node:events'
import type { ChildProcess } from 'node:child_process'
import { Agent, request } from 'undici'
import { createParser } from 'eventsource-parser'
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js'
import type { FakeLlmServer, FakeStep } from '../helpers/fake-llm-server.js'

export type TurnKind = 'json' | 'sse' | 'rpc' | 'mcp'

export const TURN_KINDS: readonly TurnKind[] = ['json', 'sse', 'rpc', 'mcp']

export interface TurnPlan {
  kind: TurnKind
  /** When the LLM's answer ends, in ms after SIGTERM (negative: before it); null: never, so the turn outlives any grace period. */
  finishAt: number | null
  /** Length of the answer in characters (default: a short sentence); long answers take many writes to flush. */
  size?: number
  /** A slow client: it starts reading the answer this long after the response headers arrive. */
  readDelayMs?: number
}

export interface Frame {
  id: string | undefined
  event: string
  data: any
}

/** What one client got for one turn. */
export interface TurnReceipt extends TurnPlan {
  /** Its place in the plan. */
  index: number
  sessionId: string
  /** The answer the fake LLM was scripted to give. */
  text: string
  /**
   * `completed`: a full answer of a completed turn; `interrupted`: the full INTERRUPTED answer;
   * `failed`: a full answer of anything else; `lost`: no full answer (cut, empty, unparsable).
   */
  outcome: 'completed' | 'interrupted' | 'failed' | 'lost'
  /** The turn number the answer names (undefined when lost). */
  turn?: number
  outputText?: string
  /** The error code of a failed or interrupted answer, and `data.reason`. */
  code?: string
  reason?: string
  status?: number
  contentType?: string
  /** The parsed body (JSON kinds) or the frames (SSE kinds), for structural checks. */
  body?: unknown
  frames?: Frame[]
  /** Why it was judged so (for assertion messages). */
  detail: string
}

export interface SubscriberReceipt {
  path: string
  frames: Frame[]
  /** Why reading the stream failed (null: it ended cleanly). */
  error: string | null
}

export interface ShutdownRun {
  turns: TurnReceipt[]
  subscribers: SubscriberReceipt[]
  /** The process's exit code (null: killed by a signal, or `timedOut`). */
  exitCode: number | null
  exitSignal: string | null
  timedOut: boolean
  /** ms from SIGTERM to the process's exit. */
  exitMs: number
}

export interface ScenarioOptions {
  url: string
  child: ChildProcess
  fake: FakeLlmServer
  /** The model sessions use; it must be served by `fake`. */
  model: string
  plan: readonly TurnPlan[]
  /** Open a session subscriber and a tenant-wide subscriber before the turns start. */
  subscribers?: boolean
  /** ms between the first turn's start and SIGTERM; by default enough for every turn to start. */
  leadMs?: number
  /** Runs right after SIGTERM, while the server drains (e.g. requests that must be refused). */
  duringDrain?: (ctx: { url: string; agent: Agent }) => Promise<void>
  /** How long to wait for the process to exit before it is killed and the run counts as timed out. */
  exitTimeoutMs: number
}

const JSON_HEADERS = { 'content-type': 'application/json' }
const SSE_HEADERS = { ...JSON_HEADERS, accept: 'text/event-stream' }
const MCP_HEADERS = { ...JSON_HEADERS, accept: 'application/json, text/event-stream', 'mcp-protocol-version': LATEST_PROTOCOL_VERSION }
/** Gaps between the fake's OpenAI stream frames for a two-chunk text: role, 2 × text, finish, usage, [DONE]. */
const FRAME_GAPS = 5

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(2)
  }
}

/** The events of an SSE body, in order, with their data parsed as JSON (or kept as text). */
export function parseSse(text: string): Frame[] {
  const frames: Frame[] = []
  const parser = createParser({
    onEvent(e) {
      let data: unknown = e.data
      try {
        data = JSON.parse(e.data)
      } catch {
        /* not JSON: kept as text */
      }
      frames.push({ id: e.id, event: e.event ?? 'message', data })
    },
  })
  parser.feed(text)
  return frames
}

/** A keep-alive client, as a load balancer or an SDK would hold one. */
export function keepAliveAgent(): Agent {
  return new Agent({ connections: 128, keepAliveTimeout: 60_000, keepAliveMaxTimeout: 60_000 })
}

async function createSession(url: string, agent: Agent, model: string): Promise<string> {
  const res = await request(`${url}/v1/sessions`, {
    method: 'POST',
    dispatcher: agent,
    headers: JSON_HEADERS,
    body: JSON.stringify({ model }),
  })
  const body = (await res.body.json()) as { session_id?: string }
  if (res.statusCode !== 201 || typeof body.session_id !== 'string')
    throw new Error(`create session: ${res.statusCode} ${JSON.stringify(body)}`)
  return body.session_id
}

/** Resolves once the subscription exists (its headers arrived); `receipt` resolves when the stream ends. */
async function subscribe(url: string, agent: Agent, path: string): Promise<{ receipt: Promise<SubscriberReceipt> }> {
  const res = await request(`${url}${path}`, { dispatcher: agent, headers: { accept: 'text/event-stream' } })
  if (res.statusCode !== 200) throw new Error(`subscribe ${path}: ${res.statusCode} ${await res.body.text()}`)
  // Wrapped: an async function returning the promise itself would wait for the stream's end.
  return {
    receipt: res.body.text().then(
      (text) => ({ path, frames: parseSse(text), error: null }),
      (err: unknown) => ({ path, frames: [], error: String(err) }),
    ),
  }
}

type Judged = Pick<TurnReceipt, 'outcome' | 'turn' | 'outputText' | 'code' | 'reason' | 'detail'>

/** A completed turn result, or an error body carrying a code (problem, JSON-RPC data, MCP structuredContent). */
function judgeResult(result: any): Judged {
  if (result && typeof result === 'object' && result.status === 'completed' && typeof result.output_text === 'string') {
    return { outcome: 'completed', turn: result.turn, outputText: result.output_text, detail: 'completed' }
  }
  return { outcome: 'failed', detail: `not a completed turn: ${JSON.stringify(result).slice(0, 300)}` }
}

function judgeError(code: unknown, data: any, raw: unknown): Judged {
  const c = typeof code === 'string' ? code : undefined
  return {
    outcome: c === 'INTERRUPTED' ? 'interrupted' : 'failed',
    code: c,
    reason: data?.reason,
    turn: data?.turn,
    detail: `${c ?? 'no code'}: ${JSON.stringify(raw).slice(0, 300)}`,
  }
}

function judgeFrames(frames: Frame[]): Judged {
  const last = frames.at(-1)
  if (last?.event === 'turn_completed')
    return {
      outcome: 'completed',
      turn: last.data.turn,
      outputText: last.data.data.output_text,
      detail: 'stream ended with turn_completed',
    }
  if (last?.event === 'turn_failed') return judgeError(last.data.data.code, { ...last.data.data, turn: last.data.turn }, last.data)
  return { outcome: 'lost', detail: `stream ended without its final event (${frames.map((f) => f.event).join(',') || 'no frames'})` }
}

function judge(kind: TurnKind, status: number, contentType: string, text: string): Judged & { body?: unknown; frames?: Frame[] } {
  if (kind === 'sse' || kind === 'mcp') {
    if (!contentType.startsWith('text/event-stream')) {
      const body = text ? JSON.parse(text) : undefined
      return { ...judgeError(body?.code ?? body?.error?.data?.code, body?.data ?? body?.error?.data, body), body }
    }
    const frames = parseSse(text)
    if (kind === 'sse') return { ...judgeFrames(frames), frames }
    const msg = frames.map((f) => f.data).find((m) => m?.jsonrpc === '2.0' && m.id === 1 && ('result' in m || 'error' in m))
    if (!msg) return { outcome: 'lost', detail: `no JSON-RPC response among ${frames.length} MCP message(s)`, frames }
    if (msg.error) return { ...judgeError(msg.error.data?.code, msg.error.data, msg), frames }
    const sc = msg.result?.structuredContent
    if (msg.result?.isError) return { ...judgeError(sc?.code, sc, msg), frames }
    return { ...judgeResult(sc), frames }
  }
  const body = JSON.parse(text)
  if (kind === 'rpc') {
    if (body?.error) return { ...judgeError(body.error.data?.code, body.error.data, body), body }
    return { ...judgeResult(body?.result), body }
  }
  if (status === 200) return { ...judgeResult(body), body }
  return { ...judgeError(body?.code, body?.data, body), body }
}

async function runTurn(
  url: string,
  agent: Agent,
  p: TurnPlan,
  sessionId: string,
  input: string,
): Promise<Omit<TurnReceipt, keyof TurnPlan | 'index' | 'sessionId' | 'text'>> {
  const kind = p.kind
  const target = {
    json: { path: `/v1/sessions/${sessionId}/turns`, headers: JSON_HEADERS, body: { input } },
    sse: { path: `/v1/sessions/${sessionId}/turns`, headers: SSE_HEADERS, body: { input } },
    rpc: {
      path: '/rpc',
      headers: JSON_HEADERS,
      body: { jsonrpc: '2.0', id: 1, method: 'turn/start', params: { session_id: sessionId, input } },
    },
    mcp: {
      path: '/mcp',
      headers: MCP_HEADERS,
      body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'turn_run', arguments: { session_id: sessionId, input } } },
    },
  }[kind]
  let status: number | undefined
  let contentType = ''
  let text: string
  try {
    const res = await request(`${url}${target.path}`, {
      method: 'POST',
      dispatcher: agent,
      headers: target.headers,
      body: JSON.stringify(target.body),
    })
    status = res.statusCode
    contentType = String(res.headers['content-type'] ?? '')
    // Not reading leaves the answer in the kernel's buffers and the server's: it cannot all be flushed yet.
    if (p.readDelayMs) await sleep(p.readDelayMs)
    text = await res.body.text()
  } catch (err) {
    return { outcome: 'lost', status, contentType, detail: `the response was cut: ${String(err)}` }
  }
  try {
    return { status, contentType, ...judge(kind, status, contentType, text) }
  } catch (err) {
    return { outcome: 'lost', status, contentType, detail: `unparsable answer (${String(err)}): ${text.slice(0, 300)}` }
  }
}

/**
 * Creates a session per planned turn, opens the subscribers, starts the turns one after another
 * (each one's LLM request must reach the fake before the next is sent, so every turn gets its own
 * scripted answer), sends SIGTERM `leadMs` after the first start, and waits for every client and
 * for the process to exit.
 */
export async function runShutdownScenario(o: ScenarioOptions): Promise<ShutdownRun> {
  const agent = keepAliveAgent()
  try {
    const sessions: string[] = []
    for (let i = 0; i < o.plan.length; i++) sessions.push(await createSession(o.url, agent, o.model))
    const subscribers = o.subscribers
      ? [await subscribe(o.url, agent, `/v1/sessions/${sessions[0]}/events`), await subscribe(o.url, agent, '/v1/events')]
      : []
    const exited = once(o.child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
    exited.catch(() => undefined)

    const t0 = performance.now()
    const signalAt = t0 + (o.leadMs ?? 250 + 40 * o.plan.length)
    const turns: Array<Promise<TurnReceipt>> = []
    for (const [i, p] of o.plan.entries()) {
      const text = answerText(i, p)
      const step: FakeStep =
        p.finishAt === null
          ? { text, hang: 'body' }
          : {
              text,
              chunkSize: Math.ceil(text.length / 2),
              delayMs: Math.max(0, Math.round((signalAt + p.finishAt - performance.now()) / FRAME_GAPS)),
            }
      const before = o.fake.requests.length
      o.fake.enqueue(step)
      const sessionId = sessions[i]!
      turns.push(runTurn(o.url, agent, p, sessionId, `question ${i}`).then((r) => ({ ...p, index: i, sessionId, text, ...r })))
      await until(() => o.fake.requests.length > before, 10_000, `turn ${i} (${p.kind}) to reach the LLM`)
    }
    const wait = signalAt - performance.now()
    if (wait > 0) await sleep(wait)

    const signalled = performance.now()
    o.child.kill('SIGTERM')
    const drained = o.duringDrain?.({ url: o.url, agent })
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      o.child.kill('SIGKILL')
    }, o.exitTimeoutMs)
    const [exitCode, exitSignal] = await exited
    const exitMs = performance.now() - signalled
    clearTimeout(timer)
    await drained
    return {
      turns: await Promise.all(turns),
      subscribers: await Promise.all(subscribers.map((s) => s.receipt)),
      exitCode: timedOut ? null : exitCode,
      exitSignal,
      timedOut,
      exitMs,
    }
  } finally {
    // Every request has settled on the way out, except when the run failed half-way.
    await agent.destroy().catch(() => undefined)
  }
}

function answerText(i: number, p: TurnPlan): string {
  const head = `answer ${i} over ${p.kind}`
  if (!p.size || p.size <= head.length) return head
  const filler = ' and more words'.repeat(Math.ceil((p.size - head.length) / 15))
  return (head + filler).slice(0, p.size)
}

/** `n` turns, kinds in rotation, whose answers end at evenly spread moments from `from` to `to` ms after the signal. */
export function spreadPlan(n: number, from: number, to: number, kinds: readonly TurnKind[] = TURN_KINDS): TurnPlan[] {
  return Array.from({ length: n }, (_, i) => ({
    kind: kinds[i % kinds.length]!,
    finishAt: Math.round(from + (n === 1 ? 0 : (i * (to - from)) / (n - 1))),
  }))
}
