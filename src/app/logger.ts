import { pino, type Logger as PinoLogger } from 'pino'

/** The process logger: pino JSON lines to stdout. */
export function createLogger(level: string): PinoLogger {
  return pino({
    level,
    base: { service: 'burrow' },
    timestamp: pino.stdTimeFunctions.isoTime,
    serializers: REQUEST_SERIALIZERS,
    redact: { paths: ['req.headers.authorization', 'headers.authorization', '*.apiKey', '*.api_key'], censor: '[redacted]' },
  })
}

// Query parameters that carry credentials. `?access_token=` is how EventSource clients
// authenticate; the others are names clients and proxies commonly use for keys and secrets,
// redacted too so that a client's mistake does not land in the logs either.
const CREDENTIAL_PARAM =
  /^(?:access[_-]?token|refresh[_-]?token|id[_-]?token|token|api[_-]?key|key|secret|client[_-]?secret|password|passwd|auth|authorization|sig|signature)$/i

/**
 * A request URL fit for the logs: the value of every credential-like query parameter
 * (matched on the decoded name, so `access%5Ftoken` counts) is `[redacted]`.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?')
  if (q < 0) return url
  const parts = url.slice(q + 1).split('&')
  let changed = false
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!
    const eq = part.indexOf('=')
    const name = eq < 0 ? part : part.slice(0, eq)
    if (eq >= 0 && CREDENTIAL_PARAM.test(decodeName(name))) {
      parts[i] = `${name}=[redacted]`
      changed = true
    }
  }
  return changed ? `${url.slice(0, q)}?${parts.join('&')}` : url
}

function decodeName(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, ' '))
  } catch {
    return name // not valid percent-encoding: compared as sent
  }
}

interface LoggedRequest {
  method?: string
  url?: string
  host?: string
  ip?: string
  socket?: { remotePort?: number } | null
}

/**
 * pino serializers for the request fastify logs with `incoming request` and framework
 * errors: fastify's own fields, with the URL's credentials redacted. Headers are not logged.
 */
export const REQUEST_SERIALIZERS = {
  req: (req: LoggedRequest) => ({
    method: req.method,
    url: typeof req.url === 'string' ? redactUrl(req.url) : req.url,
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket ? req.socket.remotePort : undefined,
  }),
}
