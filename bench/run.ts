/**
 * Runs the benchmarks and (re)writes docs/benchmarks.md.
 *
 *   npx tsx bench/run.ts                 every bench/*.bench.ts, in name order
 *   npx tsx bench/run.ts sse-fanout      only those named (sections of the others are kept)
 *   --no-write   print the results, leave docs/benchmarks.md alone
 *   --strict     exit 1 when a target is missed (a crashed benchmark always exits 1)
 *   --no-wait    start at once, even when other work keeps the CPUs busy
 *   --render-only  run nothing; rewrite the document from its existing sections (after a generator change)
 *
 * Every bench module exports `run(): Promise<BenchResult>` (bench/lib/types.ts).
 */
import { existsSync, readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { REPO_ROOT } from './lib/child.js'
import {
  machine,
  otherLoad,
  parseAnalysis,
  parseSections,
  renderDoc,
  renderError,
  renderSection,
  usage,
  type Section,
} from './lib/report.js'
import { sleep, type BenchResult } from './lib/types.js'

const BENCH_DIR = join(REPO_ROOT, 'bench')
const DOC = join(REPO_ROOT, 'docs', 'benchmarks.md')
/** Before each benchmark, wait up to this long for the machine's CPUs to be at most QUIET_BUSY busy. */
const QUIET_WAIT_S = 90
const QUIET_BUSY = 0.2

const args = process.argv.slice(2)
const flags = new Set(args.filter((a) => a.startsWith('--')))
const wanted = args.filter((a) => !a.startsWith('--')).map((a) => a.replace(/^bench\//, '').replace(/\.bench\.ts$/, ''))

const available = readdirSync(BENCH_DIR)
  .filter((f) => f.endsWith('.bench.ts'))
  .map((f) => f.slice(0, -'.bench.ts'.length))
  .sort()
const unknown = wanted.filter((w) => !available.includes(w))
if (unknown.length) {
  console.error(`unknown benchmark(s): ${unknown.join(', ')}; available: ${available.join(', ')}`)
  process.exit(2)
}
const toRun = flags.has('--render-only') ? [] : wanted.length ? available.filter((n) => wanted.includes(n)) : available

const fresh: Section[] = []
let crashed = false
let missed = false
for (const [i, name] of toRun.entries()) {
  if (i > 0) await sleep(2_000) // let the previous server's sockets and memory settle
  let m = await machine()
  // Wait (up to QUIET_WAIT_S) for other work on the machine to calm down: the numbers are only as good as the quiet.
  for (
    const t0 = Date.now();
    !flags.has('--no-wait') && m.busyBefore !== null && m.busyBefore > QUIET_BUSY && Date.now() - t0 < QUIET_WAIT_S * 1000;
  ) {
    console.log(`  waiting for a quiet machine (CPUs ${(m.busyBefore * 100).toFixed(0)} % busy)…`)
    await sleep(2_000)
    m = await machine()
  }
  console.log(
    `\n=== ${name} (load ${m.load.toFixed(2)}${m.busyBefore === null ? '' : `, CPUs ${(m.busyBefore * 100).toFixed(0)} % busy`}) ===`,
  )
  const u0 = usage()
  try {
    const mod = (await import(pathToFileURL(join(BENCH_DIR, `${name}.bench.ts`)).href)) as { run?: () => Promise<BenchResult> }
    if (typeof mod.run !== 'function') throw new Error(`bench/${name}.bench.ts does not export run()`)
    const r = await mod.run()
    m.otherDuring = otherLoad(u0, usage())
    if (r.name !== name) throw new Error(`bench/${name}.bench.ts returned a result named '${r.name}'`)
    if (!r.pass) missed = true
    console.log(`${r.pass ? 'PASS' : 'FAIL'} ${r.title} (${r.durationSeconds.toFixed(0)} s)`)
    for (const mt of r.metrics)
      console.log(
        `  ${mt.name}: ${mt.value.toFixed(2)} ${mt.unit}${mt.baseline === undefined ? '' : ` (baseline ${mt.baseline.toFixed(2)}, ratio ${(mt.ratio ?? NaN).toFixed(3)})`}`,
      )
    for (const t of r.targets) console.log(`  [${t.pass ? 'PASS' : 'FAIL'}] ${t.name}: ${t.actual.toFixed(3)} ${t.op} ${t.limit}`)
    if (m.otherDuring != null) console.log(`  other processes used ${(m.otherDuring * 100).toFixed(0)} % of all CPUs during the run`)
    fresh.push(renderSection(r, m))
  } catch (err) {
    crashed = true
    console.error(`ERROR ${name}:`, err)
    fresh.push(renderError(name, err, m))
  }
}

if (!flags.has('--no-write')) {
  const old = existsSync(DOC) ? readFileSync(DOC, 'utf8') : ''
  const kept = parseSections(old)
  const byName = new Map<string, Section>(kept.map((s) => [s.name, s]))
  for (const s of fresh) byName.set(s.name, s)
  // Benchmarks in file order, then sections of benchmarks that no longer exist (kept as they were).
  const order = [...available.filter((n) => byName.has(n)), ...[...byName.keys()].filter((n) => !available.includes(n)).sort()]
  mkdirSync(join(REPO_ROOT, 'docs'), { recursive: true })
  writeFileSync(
    DOC,
    renderDoc(
      order.map((n) => byName.get(n)!),
      parseAnalysis(old),
    ),
  )
  console.log(`\nwrote ${DOC} (${fresh.length} section(s) updated, ${order.length - fresh.length} kept)`)
}
process.exit(crashed || (missed && flags.has('--strict')) ? 1 : 0)
