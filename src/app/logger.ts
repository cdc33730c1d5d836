import { pino, type Logger as PinoLogger } from 'pino'

/** The process logger: pino JSON lines to stdout. */
export function createLogger(level: string): PinoLogger {
  return pino({
    level,
    base: { service: 'burrow' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: ['req.headers.authorization', 'headers.authorization', '*.apiKey', '*.api_key'], censor: '[redacted]' },
  })
}
