// How the tests run Burrow's own code in child processes (the server, the CLI, a fixture script):
// from the build in dist/ when it is up to date with src/, else from the sources through tsx.
// CI builds before it tests, so its children start as `npm start` does, without compiling
// TypeScript in every child. A build older than any source file is never run — it would test
// yesterday's code: `BURROW_TEST_CODE=dist` insists on the build and fails at once when it is
// stale, `=src` always runs the sources, unset chooses the build only when it is fresh.
import { readdirSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const SRC = join(ROOT, 'src')
const DIST = join(ROOT, 'dist')
// Absolute, so a child whose working directory is elsewhere still finds the TypeScript loader.
const TSX = import.meta.resolve('tsx')
/** Preloaded into every child: it ends itself when this test process is gone. */
const LIFELINE = `${new URL('./lifeline.mjs', import.meta.url).href}?parent=${process.pid}`

/** Source files (relative to src/) whose compiled file in dist/ is missing or older. */
export function staleBuildFiles(): string[] {
  const stale: string[] = []
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name)
      if (e.isDirectory()) walk(path)
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) {
        const rel = relative(SRC, path)
        const built = join(DIST, rel.slice(0, -'.ts'.length) + '.js')
        let builtAt = -1
        try {
          builtAt = statSync(built).mtimeMs
        } catch {
          /* not built */
        }
        if (builtAt < statSync(path).mtimeMs) stale.push(rel)
      }
    }
  }
  walk(SRC)
  return stale
}

let chosen: 'dist' | 'src' | undefined

/** Where children run Burrow from: 'dist' (the build, up to date) or 'src' (through tsx). Decided once per test process. */
export function codeUnderTest(): 'dist' | 'src' {
  if (chosen) return chosen
  const wanted = process.env.BURROW_TEST_CODE ?? ''
  if (!['', 'dist', 'src'].includes(wanted)) throw new Error(`BURROW_TEST_CODE must be dist or src, not ${wanted}`)
  if (wanted === 'src') return (chosen = 'src')
  const stale = staleBuildFiles()
  if (stale.length === 0) return (chosen = 'dist')
  if (wanted === 'dist')
    throw new Error(
      `BURROW_TEST_CODE=dist, but dist/ is older than ${stale.length} source file(s) (${stale.slice(0, 5).join(', ')}${stale.length > 5 ? ', …' : ''}): run npm run build`,
    )
  return (chosen = 'src')
}

/** Node arguments that run entry point `src/bin/<name>.ts` (or its build), followed by `args`. */
export function binArgs(name: 'server' | 'burrow', args: string[] = []): string[] {
  return codeUnderTest() === 'dist' ? scriptArgs(join(DIST, 'bin', `${name}.js`), args) : scriptArgs(join(SRC, 'bin', `${name}.ts`), args)
}

/** Node arguments that run `script` (through tsx when it is TypeScript), followed by `args`. */
export function scriptArgs(script: string, args: string[] = []): string[] {
  return ['--import', LIFELINE, ...(script.endsWith('.ts') ? ['--import', TSX] : []), script, ...args]
}
