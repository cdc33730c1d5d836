/**
 * The service code the benchmarks measure: by default the compiled build in `dist/` — what
 * `npm start`, the `burrow` bin and the package run — built here first when it is missing or
 * older than `src/`. `BENCH_APP=src` measures the TypeScript sources through tsx instead; its
 * esbuild transform wraps every closure the code creates in a `__name(…)` call
 * (Object.defineProperty per closure), which costs ~40 % more CPU per turn than the build, so
 * those figures are not what ships.
 *
 * Bench modules import the service's values through `appImport` (types stay static imports).
 */
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

/** The repository's root directory. */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')

export const APP = process.env.BENCH_APP === 'src' ? 'src' : 'dist'

function newest(dir: string, ext: string): number {
  let t = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) t = Math.max(t, newest(p, ext))
    else if (e.name.endsWith(ext)) t = Math.max(t, statSync(p).mtimeMs)
  }
  return t
}

let built = process.env.BENCH_APP_BUILT === '1' || APP === 'src'

/** Builds dist/ (npm run build) when it is missing or older than src/; once per process. */
export function ensureBuilt(): void {
  if (built) return
  const dist = join(REPO_ROOT, 'dist')
  if (!existsSync(join(dist, 'app', 'burrow.js')) || newest(join(REPO_ROOT, 'src'), '.ts') > newest(dist, '.js')) {
    console.log('[bench] building dist/ (npm run build) — the benchmarks measure the compiled service')
    execFileSync('npm', ['run', 'build'], { cwd: REPO_ROOT, stdio: ['ignore', 'ignore', 'inherit'] })
  }
  built = true
  process.env.BENCH_APP_BUILT = '1' // children forked from here skip the check
}

/** Imports a service module by its path under src/ or dist/ (`'store/lmdb-env.js'`), from the build by default. */
export async function appImport<T>(rel: string): Promise<T> {
  ensureBuilt()
  return (await import(pathToFileURL(join(REPO_ROOT, APP, rel)).href)) as T
}
