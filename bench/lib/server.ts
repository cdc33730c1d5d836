/**
 * The server side of a benchmark, run in a child process (see child.ts) so the
 * load generator's CPU and memory are not counted against the service.
 *
 *   argv[2] = 'burrow' — createBurrow(loadConfig(env)) with env from BENCH_SERVER_ENV (JSON), from dist/ (lib/app.ts)
 *   argv[2] = 'hello'  — a minimal fastify app: POST /hello → {"hello":"world"}
 *
 * IPC: sends {type:'ready', url, timings} once listening (timings: ms since the process started); answers {type:'stats', gc} with
 * {type:'stats', ...process.memoryUsage(), cpu} (after full GCs when asked);
 * {type:'stop'} closes the server and exits.
 */
import Fastify from 'fastify'
import { appImport } from './app.js'

export interface ServerStats {
  rss: number
  heapTotal: number
  heapUsed: number
  external: number
  arrayBuffers: number
  /** Whether two full GCs ran just before (only when asked and --expose-gc). */
  gc: boolean
  /** process.cpuUsage() of the server process, µs. */
  cpuUserUs: number
  cpuSystemUs: number
}
/** Milestones of the child's start-up, in ms since its process started (performance.now()). */
export interface StartupTimings {
  /** This module's body starts: node, tsx and every static import are loaded. */
  importedMs: number
  /** createBurrow() resolved: config, service, store opened, recovery, projector started. */
  createdMs: number
  /** listen() resolved (the start-up log line is written then). */
  listeningMs: number
}
export type ChildMessage =
  { type: 'ready'; url: string; timings?: StartupTimings } | ({ type: 'stats' } & ServerStats) | { type: 'error'; message: string }
export type ParentMessage = { type: 'stats'; gc: boolean } | { type: 'stop' }

const importedMs = performance.now()
let createdMs = NaN

async function start(mode: string): Promise<{ url: string; close: () => Promise<void> }> {
  if (mode === 'burrow') {
    const env = JSON.parse(process.env.BENCH_SERVER_ENV ?? '{}') as Record<string, string>
    const { createBurrow } = await appImport<typeof import('../../src/app/burrow.js')>('app/burrow.js')
    const { loadConfig } = await appImport<typeof import('../../src/app/config.js')>('app/config.js')
    const { createLogger } = await appImport<typeof import('../../src/app/logger.js')>('app/logger.js')
    const burrow = await createBurrow(loadConfig(env), { logger: createLogger('silent'), defaultMetrics: false })
    createdMs = performance.now()
    const url = await burrow.listen()
    return { url, close: () => burrow.close() }
  }
  if (mode === 'hello') {
    const app = Fastify({ logger: false })
    app.post('/hello', async () => ({ hello: 'world' }))
    const url = await app.listen({ host: '127.0.0.1', port: 0 })
    return { url, close: () => app.close() }
  }
  throw new Error(`unknown server mode '${mode}'`)
}

function send(m: ChildMessage): void {
  process.send?.(m)
}

const gc = (globalThis as { gc?: () => void }).gc

try {
  const server = await start(process.argv[2] ?? '')
  process.on('message', (m: ParentMessage) => {
    if (m.type === 'stats') {
      if (m.gc && gc) {
        gc()
        gc()
      }
      const cpu = process.cpuUsage()
      send({ type: 'stats', ...process.memoryUsage(), gc: Boolean(m.gc && gc), cpuUserUs: cpu.user, cpuSystemUs: cpu.system })
    } else if (m.type === 'stop') {
      const hard = setTimeout(() => process.exit(0), 5_000)
      hard.unref()
      server.close().finally(() => process.exit(0))
    }
  })
  process.on('disconnect', () => process.exit(0))
  send({ type: 'ready', url: server.url, timings: { importedMs, createdMs, listeningMs: performance.now() } })
} catch (err) {
  send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) })
  process.exit(1)
}
