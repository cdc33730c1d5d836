// Runs the real server entry point (dist/bin/server.js when the build is up to date, else
// src/bin/server.ts: see burrow-bin.ts) in a child process and waits for its start-up log line,
// or for it to exit first; for tests that signal or kill the process, and for tests of
// start-ups that must fail. A child still running when its test file ends is killed.
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { chownSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { binArgs, scriptArgs } from './burrow-bin.js'
import { reaped } from './children.js'

export interface ChildServer {
  child: ChildProcess
  url: string
  lines: any[]
  stderr: string[]
}

/** How a start ended: listening, or exited before it listened. */
export type StartOutcome =
  | { kind: 'listening'; server: ChildServer }
  | { kind: 'exited'; code: number | null; signal: NodeJS.Signals | null; stderr: string; lines: any[] }

export interface StartOptions {
  /** Working directory of the child (default: this helpers directory, which holds no `.env`). */
  cwd?: string
  /** Run the child as this user and group (needs root). */
  uid?: number
  gid?: number
  /**
   * `true` (default): the test's environment plus an ephemeral, capability-free build, under `env`.
   * `false`: only PATH, HOME and TMPDIR under `env`, so nothing but `env` (and a `.env`) configures it.
   */
  inherit?: boolean
  /** The server entry point to run, `.ts` through tsx (default: this checkout's server, built or not). */
  entry?: string
}

// The server reads `.env` from its working directory: a developer's `.env` in the checkout must
// not configure the tests' servers, so children run from a directory that never holds one.
const HERE = fileURLToPath(new URL('.', import.meta.url))

/** Starts the server and resolves once it listens; rejects (with `code` and `stderr`) when it exits first. */
export async function spawnServer(env: Record<string, string>, opts: StartOptions = {}): Promise<ChildServer> {
  const out = await startServer(env, opts)
  if (out.kind === 'listening') return out.server
  throw Object.assign(new Error(`server exited before listening (${out.code ?? out.signal}): ${out.stderr}`), {
    code: out.code,
    stderr: out.stderr,
  })
}

/** Starts the server and resolves with how the start ended. */
export function startServer(env: Record<string, string>, opts: StartOptions = {}): Promise<StartOutcome> {
  const base =
    opts.inherit === false
      ? pick(process.env, ['PATH', 'HOME', 'TMPDIR'])
      : { ...process.env, HOST: '127.0.0.1', PORT: '0', BURROW_SESSION_STORE: 'off', BURROW_MEMORY_STORE: 'off', BURROW_COMPACTION: 'off' }
  // Another user's child gets a home of its own: tap's process-info hook, which tap injects into
  // every child, writes under the test's working directory at exit, where that user may not write.
  const home = opts.uid !== undefined ? userHome(opts.uid, opts.gid ?? opts.uid) : undefined
  const args = opts.entry ? scriptArgs(opts.entry) : binArgs('server')
  const child = spawn(process.execPath, args, {
    cwd: opts.cwd ?? HERE,
    env: { ...base, ...(home ? { HOME: home, _TAPJS_PROCESSINFO_CWD_: home } : {}), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(opts.uid !== undefined ? { uid: opts.uid } : {}),
    ...(opts.gid !== undefined ? { gid: opts.gid } : {}),
  })
  reaped(child)
  const lines: any[] = []
  const stderr: string[] = []
  child.stderr!.on('data', (d) => stderr.push(String(d)))
  if (home) child.once('close', () => rmSync(home, { recursive: true, force: true }))
  let buf = ''
  return new Promise((resolve) => {
    child.stdout!.on('data', (d) => {
      buf += d
      let i
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i)
        buf = buf.slice(i + 1)
        try {
          const j = JSON.parse(line)
          lines.push(j)
          if (j.address) resolve({ kind: 'listening', server: { child, url: j.address, lines, stderr } })
        } catch {
          /* not a log line */
        }
      }
    })
    // 'close', not 'exit': by then stderr has been read to its end.
    child.once('close', (code, signal) => resolve({ kind: 'exited', code, signal, stderr: stderr.join(''), lines }))
  })
}

/** Stops a listening child with SIGTERM and waits for it to exit. */
export async function stopServer(server: ChildServer): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return
  const closed = once(server.child, 'close')
  server.child.kill('SIGTERM')
  await closed
}

function userHome(uid: number, gid: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-home-'))
  chownSync(dir, uid, gid)
  return dir
}

function pick(env: NodeJS.ProcessEnv, names: string[]): Record<string, string> {
  const out: Record<string, string> = {}
  for (const n of names) if (env[n] !== undefined) out[n] = env[n]!
  return out
}
