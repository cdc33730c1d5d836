/**
 * Summarises a V8 .cpuprofile (from BENCH_CPU_PROF=1): self time by function and by
 * source (package or repo file), and inclusive time of the heaviest frames.
 *
 *   npx tsx bench/lib/profile-summary.ts bench/.profiles/burrow-….cpuprofile [top=30]
 */
import { readFileSync } from 'node:fs'

interface Node {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
  hitCount?: number
}
interface Profile {
  nodes: Node[]
  samples: number[]
  timeDeltas: number[]
  startTime: number
  endTime: number
}

const file = process.argv[2]
if (!file) {
  console.error('usage: profile-summary.ts <file.cpuprofile> [top]')
  process.exit(2)
}
const top = Number(process.argv[3] ?? 30)
const p = JSON.parse(readFileSync(file, 'utf8')) as Profile

const byId = new Map(p.nodes.map((n) => [n.id, n]))
const parent = new Map<number, number>()
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id)

const selfUs = new Map<number, number>()
for (let i = 0; i < p.samples.length; i++) selfUs.set(p.samples[i]!, (selfUs.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0))
const total = [...selfUs.values()].reduce((a, b) => a + b, 0)

function source(url: string): string {
  if (!url) return '(native/V8)'
  const nm = url.lastIndexOf('node_modules/')
  if (nm >= 0) {
    const rest = url.slice(nm + 13).split('/')
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!
  }
  const src = url.indexOf('/src/')
  if (src >= 0) return url.slice(src + 1)
  if (url.startsWith('node:')) return url
  return url.replace(/^file:\/\//, '')
}
const label = (n: Node) => `${n.callFrame.functionName || '(anonymous)'} ${source(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`

const fnSelf = new Map<string, number>()
const srcSelf = new Map<string, number>()
const incl = new Map<string, number>()
for (const [id, us] of selfUs) {
  const n = byId.get(id)!
  fnSelf.set(label(n), (fnSelf.get(label(n)) ?? 0) + us)
  srcSelf.set(source(n.callFrame.url), (srcSelf.get(source(n.callFrame.url)) ?? 0) + us)
  const seen = new Set<string>()
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const l = label(byId.get(cur)!)
    if (!seen.has(l)) {
      seen.add(l)
      incl.set(l, (incl.get(l) ?? 0) + us)
    }
  }
}

const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)} %`
const show = (title: string, m: Map<string, number>, n: number) => {
  console.log(`\n## ${title}`)
  for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, n))
    console.log(`${pct(v)}  ${(v / 1000).toFixed(0).padStart(7)} ms  ${k}`)
}
console.log(`${file}: ${(total / 1000).toFixed(0)} ms sampled`)
show('self time by source', srcSelf, top)
show('self time by function', fnSelf, top)
show('inclusive time by function', incl, top)
