// Runs the server (built or not: see burrow-bin.ts) in a child process the way a deployment runs it, for tests that
// need the process's real signal handling (see spawnBareServer).
import { spawn } from 'node:child_process'
import { binArgs } from '../helpers/burrow-bin.js'
import type { ChildServer } from '../helpers/child-server.js'
import { reaped } from '../helpers/children.js'

/**
 * Like spawnServer (test/helpers/child-server.ts), but with a bare node: tap puts its
 * process-info loader into every child's NODE_OPTIONS, and that loader (signal-exit)
 * catches SIGXFSZ and re-raises it — killing a process whose write passes its file size
 * limit, where a plain node ignores the signal and the write fails with EFBIG. `env -u
 * NODE_OPTIONS` gives the server its own, untouched node. `nodeArgs` go before the script.
 */
export function spawnBareServer(env: Record<string, string>, nodeArgs: string[] = []): Promise<ChildServer> {
  const child = spawn('env', ['-u', 'NODE_OPTIONS', process.execPath, ...nodeArgs, ...binArgs('server')], {
    cwd: new URL('../..', import.meta.url).pathname,
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: '0',
      BURROW_SESSION_STORE: 'off',
      BURROW_MEMORY_STORE: 'off',
      BURROW_COMPACTION: 'off',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  reaped(child)
  const lines: any[] = []
  const stderr: string[] = []
  child.stderr.on('data', (d) => stderr.push(String(d)))
  let buf = ''
  return new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      buf += d
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const line = buf.slice(0, i)
        buf = buf.slice(i + 1)
        let j: any
        try {
          j = JSON.parse(line)
        } catch {
          continue /* not a log line */
        }
        lines.push(j)
        if (j.address) resolve({ child, url: j.address, lines, stderr })
      }
    })
    child.once('exit', (code, signal) => reject(new Error(`server exited before listening (${code ?? signal}): ${stderr.join('')}`)))
  })
}
