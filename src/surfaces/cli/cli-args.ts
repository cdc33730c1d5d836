import { parseArgs } from 'node:util'
import { BurrowError } from '../../core/errors.js'

/** A parsed command line: the command words, its positional arguments and the options. */
export interface CliArgs {
  /** `serve`, `run`, `resume`, `sessions list`, …, `help`, `version`. */
  command: string
  args: string[]
  url: string | undefined
  apiKey: string | undefined
  dataDir: string | undefined
  json: boolean
  /** Command options by name (`--limit 5` → `limit: '5'`, `--memory` → `memory: true`). */
  opts: Record<string, string | boolean | undefined>
}

const OPTIONS = {
  url: { type: 'string' },
  'api-key': { type: 'string' },
  'data-dir': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
  // serve
  host: { type: 'string' },
  port: { type: 'string' },
  // run / resume
  model: { type: 'string' },
  system: { type: 'string' },
  'session-config': { type: 'string' },
  'max-tokens': { type: 'string' },
  settings: { type: 'string' },
  'on-busy': { type: 'string' },
  memory: { type: 'boolean' },
  // sessions list, memory search
  status: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  session: { type: 'string' },
  scope: { type: 'string' },
  metadata: { type: 'string' },
  'created-after': { type: 'string' },
  'created-before': { type: 'string' },
  'updated-after': { type: 'string' },
  'updated-before': { type: 'string' },
  // sessions update, sessions fork
  patch: { type: 'string' },
  'at-seq': { type: 'string' },
} as const

/** Which options each command takes (the global ones are always allowed). */
const COMMANDS: Record<string, { args: [min: number, max: number]; opts: string[]; usage: string }> = {
  serve: { args: [0, 0], opts: ['host', 'port'], usage: 'burrow serve [--host H] [--port P]' },
  run: {
    args: [1, 1],
    opts: ['model', 'system', 'memory', 'session-config', 'max-tokens', 'settings'],
    usage: 'burrow run [--model M] [--system TEXT] [--memory] [--session-config JSON] [--max-tokens N] [--settings JSON] "prompt"',
  },
  resume: {
    args: [2, 2],
    opts: ['max-tokens', 'settings', 'on-busy'],
    usage:
      'burrow resume <session-id> [--max-tokens N] [--settings JSON (temperature, stop, response_format…)] [--on-busy reject|queue|interrupt] "prompt"',
  },
  'sessions list': {
    args: [0, 0],
    opts: ['status', 'limit', 'cursor', 'metadata', 'created-after', 'created-before', 'updated-after', 'updated-before'],
    usage:
      'burrow sessions list [--status active|archived] [--limit N] [--cursor C] [--metadata JSON] [--created-after T] [--created-before T] [--updated-after T] [--updated-before T]',
  },
  'sessions fork': {
    args: [1, 1],
    opts: ['at-seq'],
    usage: 'burrow sessions fork <session-id> [--at-seq N]   (a new session with its history up to event N; default: now)',
  },
  'sessions update': {
    args: [1, 1],
    opts: ['metadata', 'system', 'patch'],
    usage: 'burrow sessions update <session-id> [--metadata JSON (null removes a key)] [--system TEXT] [--patch JSON (tools, compaction…)]',
  },
  'sessions show': { args: [1, 1], opts: [], usage: 'burrow sessions show <session-id>' },
  'sessions archive': { args: [1, 1], opts: [], usage: 'burrow sessions archive <session-id>' },
  'sessions delete': { args: [1, 1], opts: [], usage: 'burrow sessions delete <session-id>' },
  'memory search': {
    args: [1, 1],
    opts: ['session', 'scope', 'limit', 'metadata'],
    usage: 'burrow memory search [--session ID] [--scope session|tenant] [--limit N] [--metadata JSON] "query"',
  },
  'memory list': {
    args: [0, 0],
    opts: ['session', 'limit', 'cursor', 'metadata'],
    usage: 'burrow memory list [--session ID] [--limit N] [--cursor C] [--metadata JSON]',
  },
  'memory get': { args: [1, 1], opts: [], usage: 'burrow memory get <entry-id>' },
  'memory delete': { args: [1, 1], opts: [], usage: 'burrow memory delete <entry-id>' },
  rpc: { args: [0, 0], opts: [], usage: 'burrow rpc            (JSON-RPC 2.0 on stdin/stdout, one message per line)' },
  mcp: { args: [0, 0], opts: [], usage: 'burrow mcp            (MCP server on stdin/stdout)' },
}
const GROUPS = new Set(['sessions', 'memory'])

export const USAGE = `Usage: burrow <command> [options]

Commands:
${Object.values(COMMANDS)
  .map((c) => `  ${c.usage}`)
  .join('\n')}

A prompt of "-" is read from stdin.

Options for every command:
  --url URL        talk to a running server (env BURROW_URL) instead of opening the data dir in-process
  --api-key KEY    the bearer key (env BURROW_API_KEY)
  --data-dir DIR   the data directory for in-process use (env BURROW_DATA_DIR, default ./data)
  --json           machine output: one JSON document on stdout (errors too: {"error":{…}})
  -h, --help       this text;  -v, --version  the version

Errors print error[CODE]: message on stderr and exit with the code's number in the error table.
`

/** Parses argv (without the node and script paths); a bad command line is `INVALID_REQUEST`. */
export function parseCli(argv: string[], env: Record<string, string | undefined>): CliArgs {
  let parsed
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true })
  } catch (err) {
    throw usageError((err as Error).message.split('\n')[0]!.replace(/\. To specify a positional.*$/, '.'))
  }
  const { values, positionals } = parsed
  const base = {
    url: values.url ?? (env.BURROW_URL || undefined),
    apiKey: values['api-key'] ?? (env.BURROW_API_KEY || undefined),
    dataDir: values['data-dir'],
    json: values.json ?? false,
  }
  if (values.version) return { ...base, command: 'version', args: [], opts: {} }
  if (values.help || positionals.length === 0) return { ...base, command: 'help', args: [], opts: {} }

  const [first, ...rest] = positionals as [string, ...string[]]
  const grouped = GROUPS.has(first)
  const command = grouped ? `${first} ${rest[0] ?? ''}`.trim() : first
  const args = grouped ? rest.slice(1) : rest
  const spec = COMMANDS[command]
  if (!spec) {
    const hint = grouped ? ` (${[...Object.keys(COMMANDS)].filter((c) => c.startsWith(`${first} `)).join(', ')})` : ''
    throw usageError(`Unknown command '${command}'${hint}.`)
  }
  const [min, max] = spec.args
  if (args.length < min || args.length > max) throw usageError(`Wrong number of arguments. Usage: ${spec.usage}`)
  const opts: Record<string, string | boolean | undefined> = {}
  for (const [name, value] of Object.entries(values)) {
    if (['url', 'api-key', 'data-dir', 'json', 'help', 'version'].includes(name)) continue
    if (!spec.opts.includes(name)) throw usageError(`Option --${name} does not apply to '${command}'. Usage: ${spec.usage}`, `--${name}`)
    opts[name] = value as string | boolean
  }
  return { ...base, command, args, opts }
}

/** An integer option, or undefined when absent. */
export function intOption(opts: CliArgs['opts'], name: string): number | undefined {
  const v = opts[name]
  if (v === undefined || typeof v === 'boolean') return undefined
  if (!/^-?\d+$/.test(v)) throw usageError(`--${name} must be an integer, got '${v}'.`, `--${name}`)
  return Number(v)
}

/** A JSON object option, or undefined when absent. */
export function jsonOption(opts: CliArgs['opts'], name: string): Record<string, unknown> | undefined {
  const v = opts[name]
  if (v === undefined || typeof v === 'boolean') return undefined
  let parsed: unknown
  try {
    parsed = JSON.parse(v)
  } catch (err) {
    throw usageError(`--${name} is not JSON: ${(err as Error).message}`, `--${name}`)
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw usageError(`--${name} must be a JSON object.`, `--${name}`)
  return parsed as Record<string, unknown>
}

function usageError(message: string, field = 'argv'): BurrowError {
  return new BurrowError('INVALID_REQUEST', message, { field })
}
