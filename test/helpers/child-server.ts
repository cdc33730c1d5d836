// Runs the real server entry point (src/bin/server.ts) in a child process and waits for
// its start-up log line; for tests that signal or kill the process.
import { spawn, type ChildProcess } from 'node:child_process'

export interface ChildServer { child: ChildProcess; url: string; lines: any[]; stderr: string[] }

export function spawnServer(env: Record<string, string>): Promise<ChildServer> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/bin/server.ts'], {
    cwd: new URL('../..', import.meta.url).pathname,
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', BURROW_SESSION_STORE: 'off', BURROW_MEMORY_STORE: 'off', BURROW_COMPACTION: 'off', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const lines: any[] = []
  const stderr: string[] = []
  child.stderr!.on('data', (d) => stderr.push(String(d)))
  let buf = ''
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      buf += d
      let i
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i)
        buf = buf.slice(i + 1)
        try {
          const j = JSON.parse(line)
          lines.push(j)
          if (j.address) resolve({ child, url: j.address, lines, stderr })
        } catch { /* not a log line */ }
      }
    })
    child.once('exit', (code, signal) => reject(Object.assign(new Error(`server exited before listening (${code ?? signal}): ${stderr.join('')}`), { code, stderr: stderr.join('') })))
  })
}
