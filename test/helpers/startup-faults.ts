// Shared by the start-up fault tests: a data directory written by the real server (both stores,
// projections), copies of it to damage, and the one assertion every refused start-up must pass.
import type { Test } from 'tap'
import { spawnSync } from 'node:child_process'
import { cp, mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Api } from './harness.js'
import { startServer, stopServer, type StartOutcome, type StartOptions } from './child-server.js'

/** Both stores on, compaction off (not what these tests are about, and it keeps starts quick). */
export const DURABLE_ENV = { BURROW_SESSION_STORE: 'lmdb', BURROW_MEMORY_STORE: 'hnsw', BURROW_COMPACTION: 'off' } as const

export const SESSIONS = 4

/**
 * A data directory the real server wrote: SESSIONS sessions with a turn each (projected under
 * sessions/), memory entries, then a graceful stop. Returns the directory holding `data/`.
 */
export async function writeDataDir(t: Test): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'burrow-startup-'))
  t.teardown(() => rm(root, { recursive: true, force: true }))
  const dataDir = join(root, 'data')
  const out = await startServer({ ...DURABLE_ENV, BURROW_DATA_DIR: dataDir })
  if (out.kind !== 'listening') throw new Error(`the server did not start: ${out.stderr}`)
  try {
    const api = new Api(out.server.url)
    for (let i = 0; i < SESSIONS; i++) {
      const id = await api.createSession({ memory: true })
      const turn = await api.turn(id, { input: `session ${i}: ${'words to store '.repeat(200)}` })
      if (turn.status !== 200) throw new Error(`turn failed: ${JSON.stringify(turn.body)}`)
    }
    const added = await api.post('/v1/memory', [{ content: 'Invoice INV-2024-0042 was paid on March 3rd.' }])
    if (added.status >= 300) throw new Error(`memory add failed: ${JSON.stringify(added.body)}`)
  } finally {
    await stopServer(out.server)
  }
  const projected = await readdir(join(dataDir, 'sessions'))
  if (projected.length !== SESSIONS) throw new Error(`expected ${SESSIONS} projected sessions, found ${projected.length}`)
  return dataDir
}

/** A copy of `dataDir` in a new temporary directory (removed at teardown); returns the copy's data dir. */
export async function copyDataDir(t: Test, dataDir: string): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'burrow-copy-'))
  t.teardown(() => rm(root, { recursive: true, force: true }))
  const copy = join(root, 'data')
  await cp(dataDir, copy, { recursive: true })
  return copy
}

/** Starts the real server on `dataDir` with both stores on. */
export function startOn(dataDir: string, env: Record<string, string> = {}, opts: StartOptions = {}): Promise<StartOutcome> {
  return startServer({ ...DURABLE_ENV, BURROW_DATA_DIR: dataDir, ...env }, opts)
}

/**
 * The start-up was refused as the operator needs it: exit code 78 (not a signal such as SIGBUS or
 * SIGSEGV), exactly one line on stderr, `burrow: …`, naming each of `mentions`, and no stack trace.
 * Returns that line. A server that listened instead is stopped and the test fails.
 */
export async function assertRefused(t: Test, out: StartOutcome, mentions: string[]): Promise<string> {
  if (out.kind === 'listening') {
    await stopServer(out.server)
    t.fail('the server started; it should have refused to')
    return ''
  }
  t.equal(out.signal, null, 'not killed by a signal (no SIGBUS, no SIGSEGV)')
  t.equal(out.code, 78, 'exit code 78')
  const lines = out.stderr.split('\n')
  t.equal(lines.length, 2, 'exactly one line on stderr')
  t.equal(lines.at(-1), '', 'and it ends with a newline')
  const line = lines[0] ?? ''
  t.ok(line.startsWith('burrow: '), 'the line starts with "burrow: "')
  for (const m of mentions) t.ok(line.includes(m), `the line names ${m}`)
  t.notOk(/^\s+at /m.test(out.stderr), 'no stack trace')
  return line
}

/** Asserts the start listened, then stops the server; returns the parsed start-up log line. */
export async function assertStarts(t: Test, out: StartOutcome, what = 'the server listened'): Promise<any> {
  if (out.kind === 'exited') {
    t.fail(`${what}: it did not start (${out.code ?? out.signal}): ${out.stderr}`)
    return undefined
  }
  const started = out.server.lines.find((l) => l.address)
  await stopServer(out.server)
  t.pass(what)
  return started
}

/** Whether this process may mount a tmpfs (root, and a kernel/container that allows it). */
export function canMount(): boolean {
  if (process.getuid?.() !== 0) return false
  const probe = spawnSync('sh', ['-c', 'd=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs "$d" && umount "$d"; r=$?; rmdir "$d"; exit $r'])
  return probe.status === 0
}

export function mount(dir: string, options: string): void {
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir])
  if (r.status !== 0) throw new Error(`mount failed: ${String(r.stderr)}`)
}

export function umount(dir: string): void {
  spawnSync('umount', [dir])
}
