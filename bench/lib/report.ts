import { readFileSync } from 'node:fs'
import os from 'node:os'
import type { BenchResult, Metric, Target } from './types.js'
import { sleep } from './types.js'

export interface Machine {
  cpu: string
  cores: number
  node: string
  os: string
  memory: string
  /** 1-minute load average when the benchmark started. */
  load: number
  /** Share of all CPUs busy during the second before the benchmark started (other work on the machine), or null. */
  busyBefore: number | null
  /** Share of all CPUs used by processes other than this run (runner + its servers) while the benchmark ran, or null. */
  otherDuring?: number | null
}

/** Machine-wide busy/total CPU ticks and this process's own + its reaped children's ticks (Linux). */
export interface Usage {
  busy: number
  total: number
  self: number
}

export function usage(): Usage | null {
  const m = cpuTimes()
  if (!m) return null
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8')
    const f = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number)
    // fields 14-17 (utime, stime, cutime, cstime) are at 11-14 after the ')'-terminated comm
    const self = (f[11] ?? 0) + (f[12] ?? 0) + (f[13] ?? 0) + (f[14] ?? 0)
    return { busy: m.total - m.idle, total: m.total, self }
  } catch {
    return null
  }
}

/** Share of all CPUs used by other processes between two snapshots (children must have exited by `b`). */
export function otherLoad(a: Usage | null, b: Usage | null): number | null {
  if (!a || !b || b.total <= a.total) return null
  return Math.max(0, (b.busy - a.busy - (b.self - a.self)) / (b.total - a.total))
}

function cpuTimes(): { idle: number; total: number } | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!
    const f = line.trim().split(/\s+/).slice(1).map(Number)
    const idle = (f[3] ?? 0) + (f[4] ?? 0)
    return { idle, total: f.reduce((a, b) => a + b, 0) }
  } catch {
    return null
  }
}

/** The machine, and how busy it was just before a benchmark (samples for one second). */
export async function machine(): Promise<Machine> {
  const a = cpuTimes()
  await sleep(1000)
  const b = cpuTimes()
  const cpus = os.cpus()
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    node: process.version,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    memory: `${(os.totalmem() / 1024 ** 3).toFixed(1)} GiB`,
    load: os.loadavg()[0] ?? 0,
    busyBefore: a && b && b.total > a.total ? 1 - (b.idle - a.idle) / (b.total - a.total) : null,
  }
}

// ---- formatting -----------------------------------------------------------------------

const group = (s: string) => s.replace(/\B(?=(\d{3})+(?!\d))/g, ',')

export function num(v: number | null | undefined, unit = ''): string {
  if (v === null || v === undefined || Number.isNaN(v)) return 'n/a'
  const abs = Math.abs(v)
  let s: string
  if (Number.isInteger(v) || abs >= 100) s = group(v.toFixed(0))
  else if (abs >= 10) s = v.toFixed(1)
  else s = v.toFixed(2)
  if (!unit) return s
  return unit === '×' || unit === '%' ? `${s}${unit === '%' ? ' %' : '×'}` : `${s} ${unit}`
}

const ratio = (r: number | undefined) => (r === undefined || !Number.isFinite(r) ? '—' : `${r.toFixed(2)}×`)
const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ')

function metricsTable(ms: Metric[]): string {
  const withBaseline = ms.some((m) => m.baseline !== undefined)
  const rows = withBaseline
    ? [
        '| Metric | Burrow | Baseline | Burrow / baseline |',
        '|---|---:|---:|---:|',
        ...ms.map(
          (m) =>
            `| ${cell(m.name)} | ${num(m.value, m.unit)} | ${m.baseline === undefined ? '—' : num(m.baseline, m.unit)} | ${ratio(m.ratio)} |`,
        ),
      ]
    : ['| Metric | Value |', '|---|---:|', ...ms.map((m) => `| ${cell(m.name)} | ${num(m.value, m.unit)} |`)]
  return rows.join('\n')
}

function targetsTable(ts: Target[]): string {
  return [
    '| Target | Measured | Required | Result |',
    '|---|---:|---:|:---:|',
    ...ts.map(
      (t) =>
        `| ${cell(t.name)} | ${num(t.actual, t.unit)} | ${t.op === '>=' ? '≥' : '≤'} ${num(t.limit, t.unit)} | ${t.pass ? 'PASS' : '**FAIL**'} |`,
    ),
  ].join('\n')
}

// ---- sections ---------------------------------------------------------------------------

export interface SectionMeta {
  title: string
  pass: boolean | null
  date: string
  summary: string
}
export interface Section {
  name: string
  meta: SectionMeta
  text: string
}

const START = /^<!-- bench:([a-z0-9._-]+):start (\{.*\}) -->$/
const end = (name: string) => `<!-- bench:${name}:end -->`

export function renderSection(r: BenchResult, m: Machine): Section {
  const passed = r.targets.filter((t) => t.pass).length
  const summary = r.targets
    .map((t) => `${t.name} ${num(t.actual, t.unit)} (${t.op === '>=' ? '≥' : '≤'} ${num(t.limit, t.unit)}) ${t.pass ? 'PASS' : 'FAIL'}`)
    .join('; ')
  const meta: SectionMeta = { title: r.title, pass: r.pass, date: r.date, summary }
  const busy =
    (m.busyBefore === null ? '' : `, CPUs ${(m.busyBefore * 100).toFixed(0)} % busy in the second before`) +
    (m.otherDuring === null || m.otherDuring === undefined
      ? ''
      : `; other processes used ${(m.otherDuring * 100).toFixed(0)} % of all CPUs during the run`)
  const lines = [
    `<!-- bench:${r.name}:start ${JSON.stringify(meta)} -->`,
    `## ${r.title}`,
    '',
    `**${r.pass ? 'PASS' : 'FAIL'}** — ${passed} of ${r.targets.length} targets met · \`bench/${r.name}.bench.ts\` · run ${r.date.replace('T', ' ').replace(/\.\d+Z$/, ' UTC')} · took ${r.durationSeconds.toFixed(0)} s · \`npx tsx bench/run.ts ${r.name}\``,
    '',
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memory} RAM · Node ${m.node} · ${m.os} · load average ${m.load.toFixed(2)} at start${busy}.`,
    '',
    r.description,
    '',
    '| Setting | Value |',
    '|---|---|',
    ...Object.entries(r.config).map(([k, v]) => `| ${cell(k)} | ${cell(typeof v === 'number' ? num(v) : `\`${v}\``)} |`),
    '',
    '### Results',
    '',
    metricsTable(r.metrics),
    '',
    '### Targets',
    '',
    targetsTable(r.targets),
    '',
    ...(r.notes.length ? ['### Notes', '', ...r.notes.map((n) => `- ${n}`), ''] : []),
    end(r.name),
  ]
  return { name: r.name, meta, text: lines.join('\n') }
}

export function renderError(name: string, err: unknown, m: Machine): Section {
  const date = new Date().toISOString()
  const msg = err instanceof Error ? (err.stack ?? err.message) : String(err)
  const meta: SectionMeta = { title: name, pass: null, date, summary: 'the benchmark did not complete' }
  return {
    name,
    meta,
    text: [
      `<!-- bench:${name}:start ${JSON.stringify(meta)} -->`,
      `## ${name}`,
      '',
      `**ERROR** — the benchmark did not complete · run ${date} · Node ${m.node} on ${m.cpu}, ${m.cores} cores`,
      '',
      '```',
      msg,
      '```',
      '',
      end(name),
    ].join('\n'),
  }
}

/** The results sections of an existing docs/benchmarks.md, by marker comments. */
export function parseSections(doc: string): Section[] {
  const out: Section[] = []
  const lines = doc.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const m = START.exec(lines[i]!)
    if (!m) continue
    const name = m[1]!
    const j = lines.indexOf(end(name), i + 1)
    if (j === -1) continue
    let meta: SectionMeta
    try {
      meta = JSON.parse(m[2]!) as SectionMeta
    } catch {
      meta = { title: name, pass: null, date: '', summary: '' }
    }
    out.push({ name, meta, text: lines.slice(i, j + 1).join('\n') })
    i = j
  }
  return out
}

const ANALYSIS_START = '<!-- bench-analysis:start (hand-written; kept as is by bench/run.ts) -->'
const ANALYSIS_END = '<!-- bench-analysis:end -->'

/** The hand-written analysis block of an existing document (kept verbatim across reruns), or null. */
export function parseAnalysis(doc: string): string | null {
  const a = doc.indexOf(ANALYSIS_START)
  const b = doc.indexOf(ANALYSIS_END, a)
  return a === -1 || b === -1 ? null : doc.slice(a, b + ANALYSIS_END.length)
}

/** The whole document: header, summary of every section, the sections in order, then the kept analysis block. */
export function renderDoc(sections: Section[], analysis: string | null = null): string {
  const verdict = (p: boolean | null) => (p === null ? 'ERROR' : p ? 'PASS' : '**FAIL**')
  return [
    '# Benchmarks',
    '',
    '<!-- Generated by bench/run.ts — edit the benchmarks or the generator (bench/lib/report.ts), not this file.',
    '     Each results section lives between bench:<name>:start/end markers; a rerun replaces the sections of the',
    '     benchmarks it ran and keeps the others. -->',
    '',
    'Each `bench/*.bench.ts` exports `run()`; `npx tsx bench/run.ts` runs them all and rewrites this file,',
    '`npx tsx bench/run.ts sse-fanout` runs one (the other sections are kept as they were). Servers run in a child',
    'process (`bench/lib/server.ts`), apart from the load generator. The service environment is `BURROW_ENV` in',
    '`bench/lib/env.ts` (capability switches; override per run with `BENCH_BURROW_ENV=\'{"BURROW_SESSION_STORE":"lmdb"}\'`).',
    '`BENCH_CPU_PROF=1` writes CPU profiles of the server to `bench/.profiles/` (summarise one with',
    '`npx tsx bench/lib/profile-summary.ts <file>`). Numbers from a shared 2-core machine are noisy: compare runs on',
    'the same machine, and read the load figure of each section. The analysis at the end is written by hand and kept',
    'across reruns (between its bench-analysis markers); re-check it when the numbers move.',
    '',
    '| Benchmark | Result | Run | Targets |',
    '|---|:---:|---|---|',
    ...sections.map(
      (s) =>
        `| [${cell(s.meta.title)}](#${anchor(s.meta.title)}) | ${verdict(s.meta.pass)} | ${s.meta.date.slice(0, 10)} | ${cell(s.meta.summary)} |`,
    ),
    '',
    ...sections.flatMap((s) => [s.text, '']),
    analysis ?? `${ANALYSIS_START}\n${ANALYSIS_END}`,
    '',
  ].join('\n')
}

/** GitHub's heading anchor. */
function anchor(title: string): string {
  return title
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-')
}
