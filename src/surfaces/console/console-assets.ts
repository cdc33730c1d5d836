import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gzipSync } from 'node:zlib'
import { EVENT_TYPES, isStoredEventType } from '../../core/events.js'

/** One file of the console, ready to send: as is and gzipped, with its validator. */
export interface ConsoleAsset {
  type: string
  body: Buffer
  gzip: Buffer
  etag: string
}

/** The console's files by URL path under /console/, and the CSP hash of the page's inline import map. */
export interface ConsoleBundle {
  index: ConsoleAsset
  assets: ReadonlyMap<string, ConsoleAsset>
  importMapHash: string
}

/** The repository's `console/` folder: beside `src/` and `dist/`, whichever this module runs from. */
const CONSOLE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'console')

/**
 * The UI library, served from its npm package as published (no bundler, no CDN): Preact (the
 * React model in 4 KB, gzipped) with its hooks, and htm (JSX-like tagged templates, so the
 * console needs no compile step). The page's import map points the bare names at these.
 */
const VENDOR: ReadonlyArray<readonly [name: string, pkg: string, file: string]> = [
  ['preact', 'preact', 'dist/preact.mjs'],
  ['preact/hooks', 'preact', 'hooks/dist/hooks.mjs'],
  ['htm', 'htm', 'dist/htm.mjs'],
]

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  '.svg': 'image/svg+xml',
}

/** The console's own files (an allow-list: nothing else under /console/ is served). */
const OWN = [
  'console.css',
  'js/app.js',
  'js/api.js',
  'js/activity.js',
  'js/sessions.js',
  'js/session.js',
  'js/timeline.js',
  'js/memory.js',
  'js/ui.js',
]

/** Reads and compresses the console once, at start-up (about 60 KB; a few milliseconds). */
export function loadConsole(): ConsoleBundle {
  const require = createRequire(import.meta.url)
  const assets = new Map<string, ConsoleAsset>()
  const imports: Record<string, string> = {}
  for (const [name, pkg, file] of VENDOR) {
    const path = join(packageDir(require.resolve(pkg)), file)
    const url = `vendor/${name.replace('/', '-')}.mjs`
    assets.set(url, asset(readFileSync(path), '.mjs'))
    imports[name] = `/console/${url}`
  }
  for (const file of OWN) assets.set(file, asset(readFileSync(join(CONSOLE_DIR, file)), file.slice(file.lastIndexOf('.'))))
  // The stored event types, from the service's own list (the views subscribe to each by name).
  const stored = EVENT_TYPES.filter((t) => isStoredEventType(t))
  assets.set('js/event-types.js', asset(Buffer.from(`export const STORED_TYPES = ${JSON.stringify(stored)}\n`), '.js'))
  const importMap = JSON.stringify({ imports })
  const html = readFileSync(join(CONSOLE_DIR, 'index.html'), 'utf8').replace(
    '<!--importmap-->',
    `<script type="importmap">${importMap}</script>`,
  )
  return {
    index: asset(Buffer.from(html), '.html'),
    assets,
    importMapHash: `sha256-${createHash('sha256').update(importMap).digest('base64')}`,
  }
}

/** The package folder of a resolved entry point (packages need not export their package.json). */
function packageDir(entry: string): string {
  let dir = dirname(entry)
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir)
  return dir
}

function asset(body: Buffer, ext: string): ConsoleAsset {
  return {
    type: TYPES[ext] ?? 'application/octet-stream',
    body,
    gzip: gzipSync(body, { level: 9 }),
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
  }
}
