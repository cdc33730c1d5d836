/**
 * sse-fanout: 1,000 concurrent SSE subscribers to ONE session's events.
 *
 * The server runs in a child process (its RSS is not mixed with this client's). This
 * process opens SUBSCRIBERS raw node:http streams on `GET /v1/sessions/{id}/events`
 * (each its own socket), parses frames incrementally, then runs TURNS turns on that
 * session one after the other. For every stored event and every subscriber:
 * delivery latency = receive time (here) − the event's `at` (server clock, same machine).
 * Every subscriber must receive every stored event of those turns exactly once, in seq order.
 * Server RSS is taken before the subscribers connect and after they are connected and the
 * events delivered (after full GCs in the server; the raw figure is reported too).
 *
 *   npx tsx bench/sse-fanout.bench.ts      (or: npx tsx bench/run.ts sse-fanout)
 *   BENCH_SUBSCRIBERS=1000 BENCH_TURNS=50 to change the load.
 */
import http from 'node:http'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { burrowEnv, capabilitySummary } from './lib/env.js'
import { startServer, type ServerChild } from './lib/child.js'
import type { ServerStats } from './lib/server.js'
import { isMain, metric, percentile, sleep, target, type BenchResult } from './lib/types.js'

/** The service env for this benchmark (capability switches live in lib/env.ts BURROW_ENV). */
const ENV = burrowEnv({
  // BURROW_SSE_HEARTBEAT_MS: '15000',   // service defaults, spelled out for whoever tunes them
  // BURROW_SSE_QUEUE_LIMIT: '1024',
})

const SUBSCRIBERS = Number(process.env.BENCH_SUBSCRIBERS ?? 1000)
const TURNS = Number(process.env.BENCH_TURNS ?? 50)
const CONNECT_CONCURRENCY = 100
const DELIVERY_TIMEOUT_MS = 20_000

const TARGET_P99_MS = 50
const TARGET_RSS_PER_SUB_KIB = 50

/** Wall-clock ms with sub-ms resolution (same epoch as the server's `at`). */
const now = () => performance.timeOrigin + performance.now()

/** One SSE stream: frames parsed as they arrive; stored events recorded as (seq, receive time). */
class Subscriber {
  readonly seqs: number[] = []
  readonly times: number[] = []
  lastSeq = 0
  gaps = 0
  duplicates = 0
  deltas = 0
  readonly controls: string[] = []
  connected = false
  ended = false
  private buf = ''
  private req: http.ClientRequest | null = null

  constructor(private readonly onStored: (seq: number, frame: string) => void) {}

  open(url: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const req = http.get(url, { agent: false, headers: { accept: 'text/event-stream' } }, (res) => {
        if (res.statusCode !== 200) {
          reject(new Error(`GET events → ${res.statusCode}`))
          res.resume()
          return
        }
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          this.feed(chunk, now())
          if (this.connected) resolve()
        })
        res.on('end', () => {
          this.ended = true
        })
        res.on('error', () => {
          this.ended = true
        })
      })
      req.on('error', (err) => {
        this.ended = true
        reject(err)
      })
      this.req = req
    })
  }

  close(): void {
    this.req?.destroy()
  }

  private feed(chunk: string, t: number): void {
    const buf = this.buf + chunk
    let start = 0
    for (let end = buf.indexOf('\n\n'); end !== -1; end = buf.indexOf('\n\n', start)) {
      this.frame(buf.slice(start, end), t)
      start = end + 2
    }
    this.buf = start === 0 ? buf : buf.slice(start)
  }

  private frame(f: string, t: number): void {
    if (f.charCodeAt(0) === 58 /* ':' comment */) {
      if (f.startsWith(': connected')) this.connected = true
      return
    }
    if (f.startsWith('id: ')) {
      const seq = Number(f.slice(4, f.indexOf('\n')))
      if (this.lastSeq !== 0 && seq !== this.lastSeq + 1) {
        if (seq <= this.lastSeq) this.duplicates++
        else this.gaps += seq - this.lastSeq - 1
      }
      if (this.lastSeq === 0 || seq > this.lastSeq) this.lastSeq = seq
      this.seqs.push(seq)
      this.times.push(t)
      this.onStored(seq, f)
      return
    }
    const ev = f.startsWith('event: ') ? f.slice(7, f.indexOf('\n')) : '(none)'
    if (ev === 'text_delta') this.deltas++
    else this.controls.push(ev)
  }
}

async function post(base: string, path: string, body: unknown): Promise<any> {
  const res = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  const json = await res.json()
  if (!res.ok) throw new Error(`POST ${path} → ${res.status} ${JSON.stringify(json)}`)
  return json
}

/** The envelope's `at` and seq, read from the frame's data line. */
function envelopeOf(frame: string): { seq: number; at: number; session_id: string; type: string } {
  const i = frame.indexOf('\ndata: ')
  const e = JSON.parse(frame.slice(i + 7)) as { seq: number; at: string; session_id: string; type: string }
  return { seq: e.seq, at: Date.parse(e.at), session_id: e.session_id, type: e.type }
}

export async function run(): Promise<BenchResult> {
  const t0 = performance.now()
  const log = (s: string) => console.log(`[sse-fanout] ${s}`)
  const server: ServerChild = await startServer('burrow', ENV)
  const subs: Subscriber[] = []
  try {
    const base = server.url
    // Warm-up: exercise the SSE and turn paths once so lazy code loading is not counted as growth.
    {
      const s = await post(base, '/v1/sessions', { model: 'offline:echo' })
      const w = new Subscriber(() => undefined)
      await w.open(`${base}/v1/sessions/${s.session_id}/events`)
      for (let i = 0; i < 3; i++) await post(base, `/v1/sessions/${s.session_id}/turns`, { input: 'warm-up' })
      w.close()
    }
    const session = (await post(base, '/v1/sessions', { model: 'offline:echo' })).session_id as string
    await sleep(200)
    const before = await server.stats(true)
    const beforeProc = server.procRss()

    const firstFrame = new Map<number, string>()
    const onStored = (seq: number, f: string) => {
      if (!firstFrame.has(seq)) firstFrame.set(seq, f)
    }
    log(`connecting ${SUBSCRIBERS} subscribers to ${session}`)
    const c0 = performance.now()
    for (let i = 0; i < SUBSCRIBERS; i += CONNECT_CONCURRENCY) {
      const batch = Array.from({ length: Math.min(CONNECT_CONCURRENCY, SUBSCRIBERS - i) }, () => new Subscriber(onStored))
      subs.push(...batch)
      await Promise.all(batch.map((s) => s.open(`${base}/v1/sessions/${session}/events`)))
    }
    const connectSeconds = (performance.now() - c0) / 1000
    await sleep(200)
    const connected = await server.stats(true)

    log(`running ${TURNS} turns`)
    const turnMs: number[] = []
    let firstSeq = Infinity
    let lastSeq = 0
    const serverCpu0 = await server.stats(false)
    const clientCpu0 = process.cpuUsage()
    const eld = monitorEventLoopDelay({ resolution: 1 })
    eld.enable()
    const r0 = performance.now()
    for (let i = 0; i < TURNS; i++) {
      const ts = performance.now()
      const r = await post(base, `/v1/sessions/${session}/turns`, { input: `hello ${i}` })
      turnMs.push(performance.now() - ts)
      if (r.status !== 'completed') throw new Error(`turn ${i} ended ${r.status}`)
      firstSeq = Math.min(firstSeq, r.first_seq)
      lastSeq = Math.max(lastSeq, r.last_seq)
    }
    const turnsSeconds = (performance.now() - r0) / 1000
    const deadline = Date.now() + DELIVERY_TIMEOUT_MS
    while (subs.some((s) => s.lastSeq < lastSeq && !s.ended) && Date.now() < deadline) await sleep(20)
    const deliveredSeconds = (performance.now() - r0) / 1000
    eld.disable()
    const clientCpu = process.cpuUsage(clientCpu0)
    const afterRaw = await server.stats(false)
    const serverCpuShare =
      (afterRaw.cpuUserUs + afterRaw.cpuSystemUs - serverCpu0.cpuUserUs - serverCpu0.cpuSystemUs) / (deliveredSeconds * 1e6)
    const clientCpuShare = (clientCpu.user + clientCpu.system) / (deliveredSeconds * 1e6)
    const afterProcRaw = server.procRss()
    const after = await server.stats(true)

    // --- completeness: every stored event of the turns, exactly once, in order, at every subscriber
    const expected = lastSeq - firstSeq + 1
    let incomplete = 0
    let gaps = 0
    let duplicates = 0
    let ended = 0
    const controls = new Map<string, number>()
    for (const s of subs) {
      const ok = s.seqs.length === expected && s.seqs.every((q, i) => q === firstSeq + i)
      if (!ok) incomplete++
      gaps += s.gaps + Math.max(0, lastSeq - s.lastSeq)
      duplicates += s.duplicates
      if (s.ended) ended++
      for (const c of s.controls) controls.set(c, (controls.get(c) ?? 0) + 1)
    }

    // --- latency: receive time − `at`, every (subscriber, stored event)
    const at = new Map<number, number>()
    for (const [seq, f] of firstFrame) {
      const e = envelopeOf(f)
      if (e.seq !== seq || e.session_id !== session) throw new Error(`frame id ${seq} carries envelope seq ${e.seq} of ${e.session_id}`)
      at.set(seq, e.at)
    }
    const lat = new Float64Array(subs.reduce((n, s) => n + s.seqs.length, 0))
    let n = 0
    for (const s of subs) for (let i = 0; i < s.seqs.length; i++) lat[n++] = s.times[i]! - at.get(s.seqs[i]!)!
    lat.sort()
    const p50 = percentile(lat, 50)
    const p90 = percentile(lat, 90)
    const p99 = percentile(lat, 99)
    const max = lat.length ? lat[lat.length - 1]! : NaN
    const deltasPerSub = subs.reduce((a, s) => a + s.deltas, 0) / subs.length
    turnMs.sort((a, b) => a - b)

    const kib = (b: number) => b / 1024
    const perSub = (a: ServerStats | number, b: ServerStats | number, key: keyof ServerStats = 'rss') =>
      kib(((typeof a === 'number' ? a : (a[key] as number)) - (typeof b === 'number' ? b : (b[key] as number))) / SUBSCRIBERS)
    const rssPerSub = perSub(after, before)
    const targets = [
      target('delivery latency p99', p99, '<=', TARGET_P99_MS, 'ms'),
      target('server RSS growth per subscriber', rssPerSub, '<=', TARGET_RSS_PER_SUB_KIB, 'KiB'),
      target('subscribers missing, duplicating or reordering a stored event', incomplete, '<=', 0, ''),
    ]
    const mib = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MiB`
    return {
      name: 'sse-fanout',
      title: `SSE fan-out: ${SUBSCRIBERS} subscribers on one session`,
      description: [
        `${SUBSCRIBERS} concurrent \`GET /v1/sessions/{id}/events\` streams (raw \`node:http\`, one socket each, frames parsed`,
        `incrementally) on one session, then ${TURNS} \`offline:echo\` turns run one after another on that session.`,
        'Delivery latency is, for every stored event at every subscriber, the receive time in the client process minus the',
        "event's `at` (the server's clock; same machine; `at` has millisecond resolution, so figures carry up to +1 ms).",
        'The server runs in a child process; RSS is its `process.memoryUsage().rss` after two forced full GCs, before the',
        'subscribers connect (after a warm-up session with one subscriber) and after they are connected and every event is delivered.',
      ].join(' '),
      config: {
        subscribers: SUBSCRIBERS,
        turns: TURNS,
        'stored events per subscriber': expected,
        'connect concurrency': CONNECT_CONCURRENCY,
        model: 'offline:echo',
        'heartbeat (ms)': ENV.BURROW_SSE_HEARTBEAT_MS ?? '15000 (default)',
        'queue limit': ENV.BURROW_SSE_QUEUE_LIMIT ?? '1024 (default)',
        capabilities: capabilitySummary(ENV),
      },
      metrics: [
        metric('delivery latency p50', p50, 'ms'),
        metric('delivery latency p90', p90, 'ms'),
        metric('delivery latency p99', p99, 'ms'),
        metric('delivery latency max', max, 'ms'),
        metric('deliveries measured (events × subscribers)', lat.length, ''),
        metric('server RSS growth per subscriber (after GC)', rssPerSub, 'KiB'),
        metric('server RSS growth per subscriber, connected only (after GC)', perSub(connected, before), 'KiB'),
        metric('server RSS growth per subscriber (no GC)', perSub(afterRaw, before), 'KiB'),
        metric('server heap used growth per subscriber (after GC)', perSub(after, before, 'heapUsed'), 'KiB'),
        metric('server heap used growth per subscriber, connected only (after GC)', perSub(connected, before, 'heapUsed'), 'KiB'),
        metric('turn duration p50 (with all subscribers attached)', percentile(turnMs, 50), 'ms'),
        metric('turn duration p99 (with all subscribers attached)', percentile(turnMs, 99), 'ms'),
        metric('server CPU during turns + delivery', serverCpuShare * 100, '%'),
        metric('client CPU during turns + delivery', clientCpuShare * 100, '%'),
        metric('subscribers incomplete (missing / duplicate / out-of-order event)', incomplete, ''),
      ],
      targets,
      pass: targets.every((t) => t.pass),
      notes: [
        `Server RSS: ${mib(before.rss)} before → ${mib(connected.rss)} connected → ${mib(after.rss)} after delivery (after GC); ` +
          `${mib(afterRaw.rss)} after delivery without GC (/proc VmRSS: ${beforeProc === null ? 'n/a' : mib(beforeProc)} → ${afterProcRaw === null ? 'n/a' : mib(afterProcRaw)}). ` +
          `Heap used ${mib(before.heapUsed)} → ${mib(connected.heapUsed)} → ${mib(after.heapUsed)}.`,
        `Connecting took ${connectSeconds.toFixed(1)} s; the ${TURNS} turns took ${turnsSeconds.toFixed(1)} s; the last event reached the last subscriber ` +
          `${deliveredSeconds.toFixed(1)} s after the first turn started.`,
        `CPU while the turns ran and were delivered (CPU time / wall time): server ${(serverCpuShare * 100).toFixed(0)} %, ` +
          `this client ${(clientCpuShare * 100).toFixed(0)} %; client event-loop delay p99 ${(eld.percentile(99) / 1e6).toFixed(1)} ms, max ${(eld.max / 1e6).toFixed(1)} ms ` +
          '(a receive time can be late by up to that much because of the client itself).',
        `Stored events per subscriber: ${expected} (seq ${firstSeq}…${lastSeq}); gaps ${gaps}, duplicates ${duplicates}, streams ended early ${ended}; ` +
          `${deltasPerSub.toFixed(1)} text_delta frames per subscriber (not stored, may be coalesced, not measured).` +
          (controls.size ? ` Control frames received: ${JSON.stringify(Object.fromEntries(controls))}.` : ''),
      ],
      date: new Date().toISOString(),
      durationSeconds: (performance.now() - t0) / 1000,
    }
  } finally {
    for (const s of subs) s.close()
    await server.stop()
  }
}

if (isMain(import.meta.url)) {
  const r = await run()
  console.log(JSON.stringify(r, null, 2))
  process.exitCode = r.pass ? 0 : 1
}
