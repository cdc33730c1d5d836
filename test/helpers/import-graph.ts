// The import graph of a source tree, for the architecture test: which file imports which,
// layer and surface rules, and cycles. Pure functions over files on disk, so the test can
// show the checker a synthetic tree with a violation and see it caught.
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'

/** Every .ts file under `dir`, recursively. */
export function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f)
    return statSync(p).isDirectory() ? sourceFiles(p) : p.endsWith('.ts') ? [p] : []
  })
}

/**
 * The module specifiers a file's text imports or re-exports: static imports (type-only ones
 * included — a type cycle is still a cycle in the design), side-effect imports, `export … from`
 * and dynamic `import()` with a literal.
 */
export function importsOf(text: string): string[] {
  const out: string[] = []
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]/g)) out.push(m[1]!)
  for (const m of text.matchAll(/(?:^|\n)\s*import\s+['"]([^'"]+)['"]/g)) out.push(m[1]!)
  for (const m of text.matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g)) out.push(m[1]!)
  return out
}

/** A relative specifier's target file (`./x.js` → `<dir>/x.ts`). */
export function resolveSpec(file: string, spec: string): string {
  return resolve(dirname(file), spec).replace(/\.js$/, '.ts')
}

/** file → the files under `root` it imports (relative specifiers only). */
export function importGraph(root: string): Map<string, string[]> {
  const graph = new Map<string, string[]>()
  for (const file of sourceFiles(root)) {
    const targets = importsOf(readFileSync(file, 'utf8'))
      .filter((s) => s.startsWith('.'))
      .map((s) => resolveSpec(file, s))
    graph.set(
      file,
      targets.filter((t) => t.startsWith(root + '/')),
    )
  }
  return graph
}

/**
 * The import cycles: each strongly connected component of more than one file, or a file that
 * imports itself, as paths relative to `root`, sorted (Tarjan's algorithm, iterative).
 */
export function importCycles(graph: Map<string, string[]>, root: string): string[][] {
  let counter = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const onStack = new Set<string>()
  const stack: string[] = []
  const out: string[][] = []
  for (const start of graph.keys()) {
    if (index.has(start)) continue
    const work: Array<{ node: string; next: number }> = [{ node: start, next: 0 }]
    index.set(start, counter)
    low.set(start, counter++)
    stack.push(start)
    onStack.add(start)
    while (work.length > 0) {
      const top = work[work.length - 1]!
      const edges = graph.get(top.node) ?? []
      if (top.next < edges.length) {
        const w = edges[top.next++]!
        if (!graph.has(w)) continue
        if (!index.has(w)) {
          index.set(w, counter)
          low.set(w, counter++)
          stack.push(w)
          onStack.add(w)
          work.push({ node: w, next: 0 })
        } else if (onStack.has(w)) low.set(top.node, Math.min(low.get(top.node)!, index.get(w)!))
        continue
      }
      work.pop()
      if (work.length > 0) {
        const parent = work[work.length - 1]!.node
        low.set(parent, Math.min(low.get(parent)!, low.get(top.node)!))
      }
      if (low.get(top.node) === index.get(top.node)) {
        const scc: string[] = []
        let w: string
        do {
          w = stack.pop()!
          onStack.delete(w)
          scc.push(w)
        } while (w !== top.node)
        if (scc.length > 1 || (graph.get(top.node) ?? []).includes(top.node)) out.push(scc.map((f) => relative(root, f)).sort())
      }
    }
  }
  return out.sort((a, b) => a[0]!.localeCompare(b[0]!))
}
