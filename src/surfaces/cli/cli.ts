import { randomUUID } from 'node:crypto'
import type { Readable, Writable } from 'node:stream'
import { BurrowError, ERROR_TABLE } from '../../core/errors.js'
import { EXIT } from '../../core/protocol-numbers.js'
import type { EventEnvelope } from '../../core/events.js'
import type { CallContext, SessionOperations } from '../../core/session-service.js'
import type { MemoryItem, MemorySearchResult, Page, SessionSummary, SessionView, TurnResult } from '../../core/wire.js'
import { runMcpStdio } from '../mcp/index.js'
import { invoke, runRpcStdio } from '../rpc/index.js'
import { intOption, jsonOption, parseCli, USAGE, type CliArgs } from './cli-args.js'
import { eventNotice, memoryItemText, memoryTable, memoryText, sessionTable, sessionText, turnFooter } from './cli-format.js'

export interface CliIo {
  stdin: Readable
  stdout: Writable
  stderr: Writable
}

/** The operations the CLI works on, and how to let go of them. */
export interface CliBackend {
  ops: SessionOperations
  close(): Promise<void>
}

/** A failure before any operation runs (configuration, a locked data dir): printed as is, with its exit code. */
export class CliFatal extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message)
  }
}

/** What the CLI needs from the process around it (the app layer provides it; tests too). */
export interface CliHost {
  io: CliIo
  env: Record<string, string | undefined>
  version: string
  /** The service in-process on the data dir, or a client of a server at `url`. May throw CliFatal. */
  connect(target: { url: string | undefined; dataDir: string | undefined }): Promise<CliBackend>
  /** Runs the HTTP server until it is stopped; resolves with the exit code. May throw CliFatal. */
  serve(opts: { host: string | undefined; port: number | undefined; dataDir: string | undefined }): Promise<number>
  /** Calls `cb` on Ctrl-C while a turn runs; returns the function that stops listening. */
  onInterrupt(cb: () => void): () => void
}

/** The exact line `sessions list` prints without the session store (docs/api.md, Error codes). */
const PERSISTENCE_OFF = ERROR_TABLE.SESSION_PERSISTENCE_DISABLED.message

/**
 * `burrow <command>`: parses the command line, runs the command against the operations
 * (the JSON-RPC method table, so checks and results are that surface's) and returns the
 * exit code: 0, or the error table's code for the error.
 */
export async function runCli(argv: string[], host: CliHost): Promise<number> {
  const { stdout, stderr } = host.io
  let cli: CliArgs | undefined
  try {
    cli = parseCli(argv, host.env)
    if (cli.command === 'help') {
      stdout.write(USAGE)
      return EXIT.OK
    }
    if (cli.command === 'version') {
      stdout.write(`${host.version}\n`)
      return EXIT.OK
    }
    if (cli.command === 'serve') {
      return await host.serve({ host: str(cli.opts.host), port: intOption(cli.opts, 'port'), dataDir: cli.dataDir })
    }
    const backend = await host.connect({ url: cli.url, dataDir: cli.dataDir })
    try {
      await command(cli, backend.ops, host)
    } finally {
      await backend.close()
    }
    return EXIT.OK
  } catch (err) {
    if (err instanceof CliFatal) {
      stderr.write(`burrow: ${err.message}\n`)
      return err.exitCode
    }
    const e = err instanceof BurrowError ? err : new BurrowError('INTERNAL', `Internal error: ${(err as Error)?.message ?? String(err)}`)
    if (cli?.json) {
      stdout.write(`${JSON.stringify({ error: { ...e.data, code: e.code, message: e.message } })}\n`)
    } else if (cli?.command === 'sessions list' && e.code === 'SESSION_PERSISTENCE_DISABLED') {
      stdout.write(`${PERSISTENCE_OFF}\n`)
    } else {
      stderr.write(`error[${e.code}]: ${e.message}\n`)
      if (e.code === 'INVALID_REQUEST' && !cli) stderr.write('Run burrow --help for usage.\n')
    }
    return ERROR_TABLE[e.code].exit
  }
}

async function command(cli: CliArgs, ops: SessionOperations, host: CliHost): Promise<void> {
  const ctx = (): CallContext => ({ apiKey: cli.apiKey, requestId: `cli-${randomUUID()}` })
  const out = (json: unknown, text: () => string) => host.io.stdout.write(cli.json ? `${JSON.stringify(json, null, 2)}\n` : text())
  const [a0, a1] = cli.args
  switch (cli.command) {
    case 'run': {
      const input = await prompt(a0!, host.io.stdin)
      const created = (await invoke(
        ops,
        'session/create',
        dropUndefined({
          ...jsonOption(cli.opts, 'session-config'),
          model: cli.opts.model,
          system_prompt: cli.opts.system,
          memory: cli.opts.memory,
        }),
        ctx(),
      )) as { session_id: string }
      await turn(cli, ops, host, 'turn/start', created.session_id, input)
      return
    }
    case 'resume':
      await turn(cli, ops, host, 'session/resume', a0!, await prompt(a1!, host.io.stdin))
      return
    case 'sessions list': {
      const q = dropUndefined({
        status: cli.opts.status,
        limit: intOption(cli.opts, 'limit'),
        cursor: cli.opts.cursor,
        metadata: jsonOption(cli.opts, 'metadata'),
        created_after: cli.opts['created-after'],
        created_before: cli.opts['created-before'],
        updated_after: cli.opts['updated-after'],
        updated_before: cli.opts['updated-before'],
      })
      const page = (await invoke(ops, 'session/list', q, ctx())) as Page<SessionSummary>
      out(page, () => sessionTable(page))
      return
    }
    case 'sessions show': {
      const view = (await invoke(ops, 'session/read', { session_id: a0 }, ctx())) as SessionView
      out(view, () => sessionText(view))
      return
    }
    case 'sessions fork': {
      const view = (await invoke(
        ops,
        'session/fork',
        dropUndefined({ session_id: a0, at_seq: intOption(cli.opts, 'at-seq') }),
        ctx(),
      )) as SessionView
      out(view, () => `Forked session ${a0} at seq ${view.forked_from?.seq} into ${view.session_id}.\n`)
      return
    }
    case 'sessions update': {
      // --metadata and --system, when given, win over the same fields of --patch.
      const changes = {
        ...jsonOption(cli.opts, 'patch'),
        ...dropUndefined({ metadata: jsonOption(cli.opts, 'metadata'), system_prompt: cli.opts.system }),
      }
      const view = (await invoke(ops, 'session/update', { session_id: a0, ...changes }, ctx())) as SessionView
      out(view, () => `Updated session ${a0} (${Object.keys(changes).join(', ')}).\n`)
      return
    }
    case 'sessions archive': {
      const r = await invoke(ops, 'session/archive', { session_id: a0 }, ctx())
      out(r, () => `Archived session ${a0}.\n`)
      return
    }
    case 'sessions delete': {
      const r = await invoke(ops, 'session/delete', { session_id: a0 }, ctx())
      out(r, () => `Deleted session ${a0}.\n`)
      return
    }
    case 'memory search': {
      const q = dropUndefined({
        q: a0,
        session_id: cli.opts.session,
        scope: cli.opts.scope,
        limit: intOption(cli.opts, 'limit'),
        metadata: jsonOption(cli.opts, 'metadata'),
      })
      const r = (await invoke(ops, 'memory/search', q, ctx())) as MemorySearchResult
      out(r, () => memoryText(r))
      return
    }
    case 'memory list': {
      const q = dropUndefined({
        session_id: cli.opts.session,
        limit: intOption(cli.opts, 'limit'),
        cursor: cli.opts.cursor,
        metadata: jsonOption(cli.opts, 'metadata'),
      })
      const p = (await invoke(ops, 'memory/list', q, ctx())) as Page<MemoryItem>
      out(p, () => memoryTable(p))
      return
    }
    case 'memory get': {
      const e = (await invoke(ops, 'memory/get', { id: a0 }, ctx())) as MemoryItem
      out(e, () => memoryItemText(e))
      return
    }
    case 'memory delete': {
      const r = await invoke(ops, 'memory/delete', { id: a0 }, ctx())
      out(r, () => `Deleted memory entry ${a0}.\n`)
      return
    }
    case 'rpc':
      await runRpcStdio(ops, { apiKey: cli.apiKey }, { input: host.io.stdin, output: host.io.stdout })
      return
    case 'mcp':
      await runMcpStdio(ops, { apiKey: cli.apiKey, version: host.version }, { stdin: host.io.stdin, stdout: host.io.stdout })
      return
  }
  throw new BurrowError('INVALID_REQUEST', `Unknown command '${cli.command}'.`)
}

/**
 * Runs a turn, streaming its text to stdout as it arrives and its tool and compaction events
 * to stderr. Ctrl-C interrupts the turn (the service closes it cleanly); `--json` prints the
 * TurnResult instead. The call carries an idempotency key, so a client whose stream breaks
 * can fetch the result without running the turn twice.
 */
async function turn(
  cli: CliArgs,
  ops: SessionOperations,
  host: CliHost,
  method: 'turn/start' | 'session/resume',
  id: string,
  input: string,
): Promise<void> {
  const { stdout, stderr } = host.io
  let streamed = false
  let atLineStart = true
  const onEvent = (e: EventEnvelope) => {
    if (cli.json) return
    if (e.type === 'text_delta') {
      const text = (e.data as EventEnvelope<'text_delta'>['data']).text
      if (!text) return
      stdout.write(text)
      streamed = true
      atLineStart = text.endsWith('\n')
      return
    }
    const notice = eventNotice(e)
    if (notice) {
      if (!atLineStart) {
        stdout.write('\n')
        atLineStart = true
      }
      stderr.write(`${notice}\n`)
    }
  }
  const stop = host.onInterrupt(() => {
    stderr.write('\n[interrupting the turn…]\n')
    ops.interrupt(id, { apiKey: cli.apiKey, requestId: `cli-${randomUUID()}` }).catch(() => {})
  })
  let result: TurnResult
  try {
    const params = dropUndefined({
      ...jsonOption(cli.opts, 'settings'),
      session_id: id,
      input,
      max_tokens: intOption(cli.opts, 'max-tokens'),
      on_busy: cli.opts['on-busy'],
      idempotency_key: randomUUID(),
    })
    result = (await invoke(ops, method, params, {
      apiKey: cli.apiKey,
      requestId: `cli-${randomUUID()}`,
      idempotencyKey: params.idempotency_key as string,
      onEvent,
      onQueued: (position) =>
        stderr.write(`[queued${position === null ? ' behind a turn on another replica' : ` (position ${position})`}…]\n`),
    })) as TurnResult
  } finally {
    stop()
  }
  if (cli.json) {
    stdout.write(`${JSON.stringify(result, null, 2)}\n`)
    return
  }
  if (!streamed && result.output_text) {
    stdout.write(result.output_text)
    atLineStart = result.output_text.endsWith('\n')
  }
  if (!atLineStart) stdout.write('\n')
  stderr.write(turnFooter(result))
}

/** A prompt argument; `-` reads it from stdin. */
async function prompt(arg: string, stdin: Readable): Promise<string> {
  if (arg !== '-') return arg
  const chunks: Buffer[] = []
  for await (const c of stdin) chunks.push(typeof c === 'string' ? Buffer.from(c) : (c as Buffer))
  const text = Buffer.concat(chunks).toString('utf8').replace(/\n$/, '')
  if (!text.trim()) throw new BurrowError('INVALID_REQUEST', 'The prompt read from stdin is empty.', { field: 'input' })
  return text
}

function str(v: string | boolean | undefined): string | undefined {
  return typeof v === 'string' ? v : undefined
}

function dropUndefined(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined))
}
