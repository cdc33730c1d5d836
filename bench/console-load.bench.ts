/**
 * console-load: the Burrow Console's first load in a real headless Chromium (issue 17): bytes
 * transferred (gzip) and the time until it is interactive, from a cold browser context each
 * time, against the OpenAPI viewer at /docs (Swagger UI, served by the same server) in the
 * same run.
 *
 *   npx tsx bench/console-load.bench.ts      (or: npx tsx bench/run.ts console-load)
 */
import type { Browser } from 'playwright-core'
import { launchChromium } from '../test/console/browser.js'
import { startServer } from './lib/child.js'
import { isMain, median, metric, target, type BenchResult } from './lib/types.js'

const LOADS = 15
const BUDGET_BYTES = 300 * 1024
const BUDGET_MS = 1000

interface Load {
  ms: number
  bytes: number
  requests: number
}

/** One cold load: a fresh context (no cache), until `ready` is visible; bytes from the page's own resource timing. */
async function load(browser: Browser, url: string, ready: string): Promise<Load> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  try {
    const page = await context.newPage()
    const t0 = performance.now()
    await page.goto(url)
    await page.locator(ready).first().waitFor({ timeout: 10_000 })
    const ms = performance.now() - t0
    const [bytes, requests] = await page.evaluate<[number, number]>(
      "(() => { const all = [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')]; return [all.reduce((s, e) => s + e.transferSize, 0), all.length] })()",
    )
    return { ms, bytes, requests }
  } finally {
    await context.close()
  }
}

export async function run(): Promise<BenchResult> {
  const t0 = performance.now()
  const server = await startServer('burrow', { BURROW_SESSION_STORE: 'lmdb', BURROW_MEMORY_STORE: 'hnsw', BURROW_DURABILITY: 'relaxed' })
  const browser = await launchChromium()
  const consoleLoads: Load[] = []
  const docsLoads: Load[] = []
  try {
    // Warm-up: the server's first answers and Chromium's own start-up are not the page's.
    await load(browser, `${server.url}/console`, 'text=Sessions')
    await load(browser, `${server.url}/docs`, '.swagger-ui .info')
    for (let i = 0; i < LOADS; i++) {
      consoleLoads.push(await load(browser, `${server.url}/console`, 'text=Sessions'))
      docsLoads.push(await load(browser, `${server.url}/docs`, '.swagger-ui .info'))
    }
  } finally {
    await browser.close()
    await server.stop()
  }
  const ms = consoleLoads.map((l) => l.ms)
  const bytes = Math.max(...consoleLoads.map((l) => l.bytes))
  const docsBytes = Math.max(...docsLoads.map((l) => l.bytes))
  const medianMs = median(ms)
  const maxMs = Math.max(...ms)
  const docsMedian = median(docsLoads.map((l) => l.ms))
  const targets = [
    target('first load, bytes transferred (largest of the loads)', bytes / 1024, '<=', BUDGET_BYTES / 1024, 'KB'),
    target('first load until interactive (slowest of the loads)', maxMs, '<=', BUDGET_MS, 'ms'),
  ]
  return {
    name: 'console-load',
    title: 'Console first load in headless Chromium',
    description:
      "A real server (child process, LMDB + HNSW) and Debian's Chromium (headless, playwright-core). Each load opens a fresh browser context (empty cache), navigates to `/console` and waits until the navigation is rendered — after the page, its modules (Preact, htm, the views) and `GET /v1/capabilities` have loaded and the app has drawn. Bytes are the page's own resource timing (`transferSize`: compressed bytes on the wire, headers included). Loads alternate with the OpenAPI viewer at `/docs` (Swagger UI from @fastify/swagger-ui, until its info block is drawn) as the baseline column.",
    config: { loads: LOADS, viewport: '1280×900', browser: 'chromium (Debian), headless' },
    metrics: [
      metric('time until interactive (median)', medianMs, 'ms', docsMedian),
      metric('time until interactive (slowest)', maxMs, 'ms', Math.max(...docsLoads.map((l) => l.ms))),
      metric('bytes transferred', bytes / 1024, 'KB', docsBytes / 1024),
      metric('requests', consoleLoads[0]!.requests, 'requests', docsLoads[0]!.requests),
    ],
    targets,
    pass: targets.every((x) => x.pass),
    notes: [
      'The files are gzipped once at start-up and served with ETags; a later load of a warm browser revalidates them (304) instead of fetching them again.',
      'Baseline: the Swagger UI page the server also serves (`/docs`), measured the same way in the same run.',
    ],
    date: new Date().toISOString(),
    durationSeconds: (performance.now() - t0) / 1000,
  }
}

if (isMain(import.meta.url)) console.log(JSON.stringify(await run(), null, 2))
