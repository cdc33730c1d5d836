import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'

/** A fresh directory under the system temp dir (named `burrow-<prefix>-…`), removed when the test ends. */
export async function tempDir(t: Test, prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `burrow-${prefix}-`))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}
