import { readdirSync, renameSync, rmSync } from 'node:fs'
import { join } from 'node:path'

// The files of the index directory (`<dataDir>/memory/hnsw`): plain file operations, no hnswlib,
// so the main thread can install, move aside and remove what the index worker wrote.

/** What the store records (in LMDB) about the index file it saved last for a tenant. */
export interface IndexFileRecord {
  file: string
  sha256: string
}

/** A written, checked index file not yet in place (see `TenantIndex.write`). */
export interface PreparedIndexFile extends IndexFileRecord {
  tmp: string
  covered: number
}

/** The key's saved files (`<key>.<labels>.bin`), the one covering the most labels first. */
export function savedFiles(dir: string, key: string): Array<{ file: string; covered: number }> {
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return []
  }
  return names
    .map((file) => ({ file, m: new RegExp(`^${key}\\.(\\d+)\\.bin$`).exec(file) }))
    .filter((x) => x.m)
    .map((x) => ({ file: x.file, covered: Number(x.m![1]) }))
    .sort((a, b) => b.covered - a.covered)
}

/** Renames a prepared file into place and removes the key's older files. */
export function installIndexFile(dir: string, key: string, prepared: PreparedIndexFile): void {
  renameSync(prepared.tmp, join(dir, prepared.file))
  for (const old of savedFiles(dir, key)) if (old.file !== prepared.file) rmSync(join(dir, old.file), { force: true })
  // Temp files of saves that died with their process (a crash, a kill) are left behind otherwise.
  for (const f of readdirSync(dir)) if (f.startsWith(`${key}.`) && f.endsWith('.tmp')) rmSync(join(dir, f), { force: true })
}

/**
 * Moves a damaged file out of the way (kept as `<name>.damaged` for a post-mortem, one per
 * key) so the next start does not trip over it again. Returns the new name, or null when
 * even that failed (the file is then rebuilt over at the next save).
 */
export function moveAside(dir: string, key: string, path: string): string | null {
  try {
    for (const f of readdirSync(dir)) if (f.startsWith(`${key}.`) && f.endsWith('.damaged')) rmSync(join(dir, f), { force: true })
    const aside = `${path}.damaged`
    renameSync(path, aside)
    return aside
  } catch {
    return null
  }
}

export function removeSavedIndexes(dir: string): void {
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return
  }
  for (const f of names) if (f.endsWith('.bin') || f.endsWith('.tmp') || f.endsWith('.damaged')) rmSync(join(dir, f), { force: true })
}
