// Runs the CLI (runCli with the real host: in-process service on a data dir, or the typed
// client with --url) on in-memory stdio, recording what went to stdout and stderr in order.
import { PassThrough } from 'node:stream'
import { spawn } from 'node:child_process'
import { cliHost } from '../../../src/app/cli-host.js'
import { runCli, type CliHost } from '../../../src/surfaces/cli/cli.js'
import { binArgs } from '../../helpers/burrow-bin.js'
import { reaped } from '../../helpers/children.js'

export interface CliRun {
  code: number
  out: string
  err: string
  /** Every write in order, tagged with its stream. */
  writes: Array<['out' | 'err', string]>
}

export interface CliOptions {
  stdin?: string
  /** Adjusts the real host (e.g. to capture the Ctrl-C handler). */
  wrap?: (host: CliHost) => CliHost
}

export async function cli(argv: string[], env: Record<string, string>, opts: CliOptions = {}): Promise<CliRun> {
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  const stdin = new PassThrough()
  const run: CliRun = { code: -1, out: '', err: '', writes: [] }
  stdout.on('data', (d) => {
    run.out += d
    run.writes.push(['out', String(d)])
  })
  stderr.on('data', (d) => {
    run.err += d
    run.writes.push(['err', String(d)])
  })
  stdin.end(opts.stdin ?? '')
  const host = cliHost({ stdin, stdout, stderr }, { LOG_LEVEL: 'error', ...env })
  run.code = await runCli(argv, opts.wrap ? opts.wrap(host) : host)
  await new Promise((r) => setImmediate(r))
  return run
}

/** Parses `--json` output. */
export const json = (r: CliRun): any => JSON.parse(r.out)

/** The real executable (dist/bin/burrow.js, or src/bin/burrow.ts through tsx: see burrow-bin.ts) in a child process. */
export function spawnCli(
  argv: string[],
  env: Record<string, string>,
  stdin = '',
): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, binArgs('burrow', argv), {
    cwd: new URL('../../..', import.meta.url).pathname,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'error', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  reaped(child)
  let out = ''
  let err = ''
  child.stdout!.on('data', (d) => {
    out += d
  })
  child.stderr!.on('data', (d) => {
    err += d
  })
  child.stdin!.end(stdin)
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, out, err })))
}
