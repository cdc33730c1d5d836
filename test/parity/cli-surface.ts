// The CLI as a surface: `runCli` with the real host (src/app/cli-host.ts) on PassThrough
// streams, against the test server (`--url`) or in-process on a data dir (`--data-dir`).
import { PassThrough, Readable } from 'node:stream'
import { cliHost, runCli } from '../../src/app/cli-host.js'
import { compactionOf, failure, row, type Outcome, type TurnOutcome } from './outcome.js'
import { rpcStdioSurface, type Opened, type Params, type Surface } from './surfaces.js'

export interface CliRun {
  exit: number
  stdout: string
  stderr: string
}

/** Where the CLI's operations go: a server (`--url`) or the service in-process on a data dir. */
export type CliTarget = { url: string } | { dataDir: string; env: Record<string, string> }

const targetArgs = (to: CliTarget) => ('url' in to ? ['--url', to.url] : ['--data-dir', to.dataDir])
const targetEnv = (to: CliTarget) => ('url' in to ? {} : to.env)

function collect(): { stream: PassThrough; text(): string } {
  const stream = new PassThrough()
  let text = ''
  stream.on('data', (c) => {
    text += String(c)
  })
  return { stream, text: () => text }
}

/** `burrow <argv>` with empty stdin; resolves with the exit code and what it printed. */
export async function burrow(to: CliTarget, argv: string[]): Promise<CliRun> {
  const out = collect()
  const err = collect()
  const exit = await runCli(
    [...argv, ...targetArgs(to)],
    cliHost({ stdin: Readable.from([]), stdout: out.stream, stderr: err.stream }, targetEnv(to)),
  )
  await new Promise<void>((r) => setImmediate(r))
  return { exit, stdout: out.text(), stderr: err.text() }
}

/** `--json` output: the result, or `{"error":{code,message,…}}` on stdout with the table's exit code. */
function jsonOutcome(r: CliRun): Outcome {
  let body: any
  try {
    body = JSON.parse(r.stdout)
  } catch {
    return failure(`<exit ${r.exit}>`, `stdout is not JSON: ${r.stdout.slice(0, 200)} ${r.stderr.slice(0, 200)}`, [])
  }
  if (r.exit === 0) return { ok: true, value: body }
  const e = body?.error
  const wire: string[] = []
  if (row(String(e?.code))?.exit !== r.exit) wire.push(`exit ${r.exit} for ${String(e?.code)} (table: ${row(String(e?.code))?.exit})`)
  if (r.stderr !== '') wire.push(`stderr ${JSON.stringify(r.stderr)}`)
  return failure(e?.code, e?.message, wire)
}

/** Text output of a failure: `error[CODE]: message` on stderr, exit code from the table. */
export function textFailure(r: CliRun): Outcome {
  const m = /^error\[([A-Z_]+)\]: (.*)\n$/.exec(r.stderr)
  if (!m) return failure(`<exit ${r.exit}>`, `stderr: ${JSON.stringify(r.stderr)}`, [])
  const wire: string[] = []
  if (row(m[1]!)?.exit !== r.exit) wire.push(`exit ${r.exit} for ${m[1]} (table: ${row(m[1]!)?.exit})`)
  if (r.stdout !== '') wire.push(`stdout ${JSON.stringify(r.stdout)}`)
  return failure(m[1], m[2], wire)
}

const FOOTER = /^session (\S+) · turn (\d+) · (\d+) in, (\d+) out(?:, (\d+) compaction)?$/
const NOTICE = /^\[compaction (started|completed|failed)[:( ]/
const QUEUED = /^\[queued(?: \(position (\d+)\)| behind a turn on another replica)…\]$/

/**
 * A turn in text mode (`burrow resume <id> <prompt>`): the answer streams to stdout; the
 * compaction notices and the footer (`session … · turn N · I in, O out[, C compaction]`)
 * go to stderr. The result is what those show: turn, output_text and usage.
 */
function textTurn(r: CliRun): TurnOutcome {
  if (r.exit !== 0) return { outcome: textFailure(r), streamed: [] }
  const lines = r.stderr.split('\n').filter((l) => l !== '')
  const footer = FOOTER.exec(lines.at(-1) ?? '')
  if (!footer) return { outcome: failure('<no footer>', `stderr: ${JSON.stringify(r.stderr)}`, []), streamed: [] }
  const streamed = lines.slice(0, -1).flatMap((l) => {
    const m = NOTICE.exec(l)
    return m ? [`compaction_${m[1]}`] : []
  })
  const queued = lines.slice(0, -1).flatMap((l) => {
    const m = QUEUED.exec(l)
    return m ? [m[1] === undefined ? null : Number(m[1])] : []
  })
  const value = {
    session_id: footer[1],
    turn: Number(footer[2]),
    output_text: r.stdout.replace(/\n$/, ''),
    usage: { input_tokens: Number(footer[3]), output_tokens: Number(footer[4]), compaction_tokens: Number(footer[5] ?? 0) },
  }
  return { outcome: { ok: true, value, partial: true }, streamed: compactionOf(streamed), queued }
}

/** The create request as `burrow run` options: --model, --system, --memory, the rest as --session-config. */
function runOptions(req: Params): string[] {
  const { model, system_prompt: system, memory, ...rest } = req
  return [
    ...(model !== undefined ? ['--model', String(model)] : []),
    ...(system !== undefined ? ['--system', String(system)] : []),
    ...(memory === true ? ['--memory'] : []),
    ...(Object.keys(rest).length > 0 ? ['--session-config', JSON.stringify(rest)] : []),
  ]
}

export interface CliSurface extends Surface {
  exec(argv: string[]): Promise<CliRun>
}

/**
 * The CLI. It has no command for the capabilities (its `--version` is compared with theirs)
 * and none that creates a session without running a turn: `open` is `burrow run --json`
 * (a full TurnResult). Later turns are `burrow resume` in text mode (the human output, with
 * its compaction notices), which needs the session store.
 */
export function cliSurface(to: CliTarget, name = 'cli'): CliSurface {
  const exec = (argv: string[]) => burrow(to, argv)
  return {
    name,
    streaming: true,
    exec,
    async capabilities() {
      const r = await exec(['--version'])
      return r.exit === 0 ? { ok: true, value: { version: r.stdout.trim() }, partial: true } : textFailure(r)
    },
    async open(req, input): Promise<Opened> {
      const outcome = jsonOutcome(await exec(['run', '--json', ...runOptions(req), input]))
      return { created: null, first: { outcome, streamed: null }, id: outcome.ok ? outcome.value.session_id : undefined }
    },
    turn: async (id, input, _how, extra = {}) => {
      const { on_busy, ...settings } = extra
      const options = [
        ...(Object.keys(settings).length > 0 ? ['--settings', JSON.stringify(settings)] : []),
        ...(on_busy !== undefined ? ['--on-busy', String(on_busy)] : []),
      ]
      return textTurn(await exec(['resume', id, ...options, input]))
    },
    read: async (id) => jsonOutcome(await exec(['sessions', 'show', id, '--json'])),
    list: async (q) =>
      jsonOutcome(
        await exec([
          'sessions',
          'list',
          '--json',
          '--limit',
          String(q.limit),
          ...(q.metadata !== undefined ? ['--metadata', JSON.stringify(q.metadata)] : []),
        ]),
      ),
    archive: async (id) => jsonOutcome(await exec(['sessions', 'archive', id, '--json'])),
    fork: async (id, req) =>
      jsonOutcome(await exec(['sessions', 'fork', id, '--json', ...(req.at_seq !== undefined ? ['--at-seq', String(req.at_seq)] : [])])),
    update: async (id, changes) => jsonOutcome(await exec(['sessions', 'update', id, '--json', '--patch', JSON.stringify(changes)])),
    async search(q) {
      const opts = [
        ...(q.limit !== undefined ? ['--limit', String(q.limit)] : []),
        ...(q.scope !== undefined ? ['--scope', String(q.scope)] : []),
        ...(q.session_id !== undefined ? ['--session', String(q.session_id)] : []),
        ...(q.metadata !== undefined ? ['--metadata', JSON.stringify(q.metadata)] : []),
      ]
      return jsonOutcome(await exec(['memory', 'search', '--json', ...opts, String(q.q)]))
    },
    async memory(op, q) {
      if (op !== 'list') return jsonOutcome(await exec(['memory', op, String(q.id), '--json']))
      const opts = [
        ...(q.limit !== undefined ? ['--limit', String(q.limit)] : []),
        ...(q.cursor !== undefined ? ['--cursor', String(q.cursor)] : []),
        ...(q.session_id !== undefined ? ['--session', String(q.session_id)] : []),
        ...(q.metadata !== undefined ? ['--metadata', JSON.stringify(q.metadata)] : []),
      ]
      return jsonOutcome(await exec(['memory', 'list', '--json', ...opts]))
    },
    async close() {},
  }
}

/** `burrow rpc --url …`: JSON-RPC on the CLI's stdin/stdout, its operations through the typed HTTP client. */
export function cliRpcSurface(url: string): Surface {
  return rpcStdioSurface('cli-rpc', async (input, output) => {
    const err = collect()
    const exit = await runCli(['rpc', '--url', url], cliHost({ stdin: input, stdout: output, stderr: err.stream }, {}))
    if (exit !== 0) throw new Error(`burrow rpc exited ${exit}: ${err.text()}`)
  })
}
