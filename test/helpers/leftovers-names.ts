// The names that tie a test's temporary directories and databases to the test process that made
// them, so that what a killed process left behind can be told from what a running one uses.
import { tmpdir } from 'node:os'
import { basename, dirname } from 'node:path'

/** A test process's temporary directory is `<tmp>/burrow-tests-<pid>` (test-process.ts). */
export const TEST_ROOT_PREFIX = 'burrow-tests-'

/** The system's temporary directory, also inside a test process (whose TMPDIR is its own). */
export function systemTmp(): string {
  const tmp = tmpdir()
  return basename(tmp).startsWith(TEST_ROOT_PREFIX) ? dirname(tmp) : tmp
}

/** A test database is `burrow_test_<prefix>_<pid>_<8 hex digits>` (pg.ts). */
export const TEST_DB_NAME = /^burrow_test_\w*?_(\d+)_[0-9a-f]{8}$/

/** Whether process `pid` is still running. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}
