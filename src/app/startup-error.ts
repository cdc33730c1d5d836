import { EXIT } from '../core/protocol-numbers.js'

/** Process exit codes outside the error table (for the entry points, which import only app/). */
export { EXIT }

/**
 * A reason the service cannot start that the operator can fix; printed as one line without a
 * stack, and the process exits `EXIT.CONFIG` (78, sysexits.h EX_CONFIG).
 */
export class StartupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'StartupError'
  }
}

/**
 * The StartupError for a failure to listen that the operator fixes with HOST/PORT (or by stopping
 * whatever holds the port); `undefined` for anything else, which is then a bug and keeps its stack.
 */
export function listenStartupError(err: unknown, host: string, port: number): StartupError | undefined {
  const code = (err as NodeJS.ErrnoException | null)?.code
  const address = `${host.includes(':') ? `[${host}]` : host}:${port}`
  const why: Record<string, string> = {
    EADDRINUSE: 'the address is already in use; stop the process listening there or set PORT to a free port',
    EACCES: `permission denied${port > 0 && port < 1024 ? ' (ports below 1024 need privileges)' : ''}; set PORT to 1024 or above`,
    EADDRNOTAVAIL: 'HOST is not an address of this machine; set HOST to one of its addresses (127.0.0.1, or 0.0.0.0 for all)',
    ENOTFOUND: 'HOST does not resolve; set HOST to an address or a name this machine resolves',
    EAI_AGAIN: 'HOST could not be resolved (temporary DNS failure); retry, or set HOST to an address',
  }
  const reason = code ? why[code] : undefined
  return reason ? new StartupError(`Cannot listen on ${address} (${code}): ${reason}.`, { cause: err }) : undefined
}
