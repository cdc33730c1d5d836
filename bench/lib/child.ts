import { execFileSync, fork, type ChildProcess } from 'node:child_process'
import { readFileSync, rmSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ensureBuilt, REPO_ROOT } from './app.js'
import type { ChildMessage, ServerStats, StartupTimings } from './server.js'

const here = dirname(fileURLToPath(import.meta.url))
export { REPO_ROOT }

export interface ServerChild {
  url: string
  pid: number
  /** The child's start-up milestones (ms since its process started), and fork() → 'ready' message as seen here. */
  startup: Partial<StartupTimings> & { forkToReadyMs: number }
  /** The child's memory (after two full GCs when `gc`) and CPU time, as it reports them. */
  stats(gc: boolean): Promise<ServerStats>
  /** VmRSS of the child from /proc (bytes), or null off Linux. */
  procRss(): number | null
  stop(): Promise<void>
}

/**
 * BENCH_PIN=1 (Linux, taskset): the server (every thread) on the last CPU, this process (the
 * load generator) on the others, so neither steals the other's core and the figures of one
 * run agree better. Off by default: it also limits the server to one core.
 */
function pinCpus(serverPid: number): void {
  if (process.env.BENCH_PIN !== '1') return
  const last = availableParallelism() - 1
  if (last < 1) return
  execFileSync('taskset', ['-a', '-p', '-c', String(last), String(serverPid)], { stdio: 'ignore' })
  execFileSync('taskset', ['-a', '-p', '-c', last === 1 ? '0' : `0-${last - 1}`, String(process.pid)], { stdio: 'ignore' })
}

/**
 * Starts bench/lib/server.ts in a child process (`node --import tsx`), so the
 * load generator in this process is measured apart from the server.
 * BENCH_CPU_PROF=1 writes V8 CPU profiles of the server to bench/.profiles/<mode>/ (one per
 * thread: the largest is the main thread; the small one is tsx's module-loader thread).
 */
export async function startServer(mode: 'burrow' | 'hello', env: Record<string, string> = {}): Promise<ServerChild> {
  const execArgv = ['--import', 'tsx', '--expose-gc']
  // BENCH_NODE_ARGS: more node flags for the server only (e.g. '--trace-gc --max-semi-space-size=32').
  execArgv.push(...(process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean))
  if (process.env.BENCH_CPU_PROF === '1') execArgv.push('--cpu-prof', `--cpu-prof-dir=${join(REPO_ROOT, 'bench', '.profiles', mode)}`)
  ensureBuilt()
  const forkedAt = performance.now()
  const child: ChildProcess = fork(join(here, 'server.ts'), [mode], {
    cwd: REPO_ROOT,
    execArgv,
    env: { ...process.env, BENCH_SERVER_ENV: JSON.stringify(env) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const exited = new Promise<void>((res) => child.once('exit', () => res()))
  let timings: Partial<StartupTimings> = {}
  const url = await new Promise<string>((res, rej) => {
    const onMsg = (m: ChildMessage) => {
      if (m.type === 'ready') {
        child.off('message', onMsg)
        timings = m.timings ?? {}
        res(m.url)
      }
      if (m.type === 'error') rej(new Error(`bench server failed to start:\n${m.message}`))
    }
    child.on('message', onMsg)
    child.once('exit', (code) => rej(new Error(`bench server exited with ${code} before it was ready`)))
  })
  const startup = { ...timings, forkToReadyMs: performance.now() - forkedAt }
  const pid = child.pid!
  pinCpus(pid)
  return {
    url,
    pid,
    startup,
    stats(gc) {
      return new Promise((res) => {
        const onMsg = (m: ChildMessage) => {
          if (m.type === 'stats') {
            child.off('message', onMsg)
            const { type: _t, ...stats } = m
            res(stats)
          }
        }
        child.on('message', onMsg)
        child.send({ type: 'stats', gc })
      })
    },
    procRss() {
      try {
        const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
        return m ? Number(m[1]) * 1024 : null
      } catch {
        return null
      }
    },
    async stop() {
      if (child.exitCode === null && child.connected) child.send({ type: 'stop' })
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000)
      await exited
      clearTimeout(t)
      const dir = env.BURROW_DATA_DIR
      if (dir && dir.startsWith(join(tmpdir(), 'burrow-bench-'))) rmSync(dir, { recursive: true, force: true })
    },
  }
}
