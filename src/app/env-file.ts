import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { parseEnv } from 'node:util'
import { StartupError } from './startup-error.js'

const ASSIGNMENT = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=/

/**
 * Loads `path` (default `.env` in the working directory) into `process.env` with Node's own loader,
 * when the file exists; a variable already in the environment wins over the file. Returns the
 * absolute path it loaded, or `null` when there is no such file.
 *
 * Throws a StartupError for a file that cannot be read, and for one Node's parser would read only
 * in part: after a line that is not `NAME=value` it silently drops the assignments that follow, so
 * a typo would quietly fall back to defaults. Values are never quoted back (they may be secrets).
 */
export function loadEnvFile(path = '.env'): string | null {
  const file = resolve(path)
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return null
    throw new StartupError(`Cannot read ${file} (${code ?? String(err)}); fix it or remove it (npm start reads .env when it exists).`)
  }
  const problem = malformedLine(text)
  if (problem) throw new StartupError(`${file} line ${problem.line} ${problem.what}; write NAME=value (or # comment) lines only.`)
  process.loadEnvFile(file)
  return file
}

/** The first line Node's parser would not take as written, if any. */
function malformedLine(text: string): { line: number; what: string } | null {
  if (text.charCodeAt(0) === 0xfeff) return { line: 1, what: 'starts with a byte-order mark, which would become part of the first name' }
  const parsed = parseEnv(text)
  const values = Object.values(parsed)
  // A line inside a multi-line quoted value (without its quote) is part of that value.
  const inValue = (line: string) => values.some((v) => v?.includes(line.replace(/^["'`]|["'`]$/g, '')))
  for (const [i, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.trim()
    if (line === '' || raw.startsWith('#')) continue
    if (line.startsWith('#'))
      return { line: i + 1, what: "is an indented comment, which Node's parser joins to the next line; start comments in the first column" }
    const name = ASSIGNMENT.exec(raw)?.[1]
    if (name !== undefined && name in parsed) continue
    if (inValue(line)) continue
    return {
      line: i + 1,
      what: name === undefined ? 'is not NAME=value' : `assigns ${name}, which Node's parser dropped (a line before it is malformed)`,
    }
  }
  return null
}
