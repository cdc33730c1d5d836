// A small structural SSE reader over undici: frames come out as objects with parsed JSON data.
import { request, Agent } from 'undici'
import { createParser } from 'eventsource-parser'
import { checkFrame } from './openapi-check.js'

export interface SseFrame {
  id: string | undefined
  event: string
  data: any
}

export interface SseStream {
  status: number
  headers: Record<string, string | string[] | undefined>
  /** Problem body when the server refused (status ≠ 200). */
  problem: any
  /** Waits for the next frame; resolves null when the stream ends. */
  next(timeoutMs?: number): Promise<SseFrame | null>
  /** Reads frames until `pred` matches (inclusive) and returns them all. */
  until(pred: (f: SseFrame) => boolean, timeoutMs?: number): Promise<SseFrame[]>
  /** Comments (heartbeats) seen so far. */
  comments: string[]
  close(): void
}

const agent = new Agent({ connections: 2000, pipelining: 0 })

export async function openSse(
  url: string,
  opts: { method?: 'GET' | 'POST'; headers?: Record<string, string>; body?: unknown } = {},
): Promise<SseStream> {
  const method = opts.method ?? 'GET'
  const controller = new AbortController()
  const res = await request(url, {
    method,
    dispatcher: agent,
    signal: controller.signal,
    headers: { accept: 'text/event-stream', ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}), ...opts.headers },
    body: opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
  })
  const frames: SseFrame[] = []
  const comments: string[] = []
  let ended = false
  let wake = null as (() => void) | null
  const errors: string[] = []
  const path = new URL(url).pathname
  if (res.statusCode !== 200 || !String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
    const text = await res.body.text()
    let problem: any = text
    try {
      problem = JSON.parse(text)
    } catch {
      /* not JSON */
    }
    return { status: res.statusCode, headers: res.headers, problem, next: async () => null, until: async () => [], comments, close() {} }
  }
  const parser = createParser({
    onEvent(e) {
      const data = JSON.parse(e.data)
      const bad = checkFrame(method, path, data)
      if (bad) errors.push(bad)
      frames.push({ id: e.id, event: e.event ?? 'message', data })
      wake?.()
    },
    onComment(c) {
      comments.push(c)
    },
  })
  ;(async () => {
    const dec = new TextDecoder()
    try {
      for await (const chunk of res.body) parser.feed(dec.decode(chunk as Uint8Array, { stream: true }))
    } catch {
      /* aborted or reset */
    }
    ended = true
    wake?.()
  })()
  const next = async (timeoutMs = 5000): Promise<SseFrame | null> => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      if (errors.length > 0) throw new Error(errors.shift())
      const f = frames.shift()
      if (f) return f
      if (ended) return null
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`no SSE frame within ${timeoutMs} ms on ${path}`)
      await new Promise<void>((r) => {
        wake = r
        setTimeout(r, Math.min(left, 50))
      })
      wake = null
    }
  }
  return {
    status: res.statusCode,
    headers: res.headers,
    problem: undefined,
    comments,
    next,
    async until(pred, timeoutMs = 5000) {
      const out: SseFrame[] = []
      for (;;) {
        const f = await next(timeoutMs)
        if (!f) throw new Error(`stream ended before the expected frame; got ${out.map((x) => x.event).join(',')}`)
        out.push(f)
        if (pred(f)) return out
      }
    },
    close() {
      controller.abort()
    },
  }
}
