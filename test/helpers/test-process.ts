// Preloaded into every test process (`node-arg` in package.json's tap config). The process gets
// a temporary directory of its own, burrow-tests-<pid>, made the parent of every temporary
// directory its tests and their child processes create (TMPDIR), and removed when the process
// exits. A test file killed at its timeout exits without finishing its teardowns: leftovers.ts,
// which tap runs after the test files, removes what such a process left behind.
import { chmodSync, mkdirSync, rmSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { systemTmp, TEST_ROOT_PREFIX } from './leftovers-names.js'

const root = join(systemTmp(), `${TEST_ROOT_PREFIX}${process.pid}`)
mkdirSync(root, { recursive: true })
// Sticky and open to all, as /tmp is: some tests run their servers as another user.
chmodSync(root, 0o1777)
// tsx keeps its transform cache in <TMPDIR>/tsx-<uid>: what runs through tsx under this TMPDIR (a
// memory index worker of an in-process service, a fixture script) shares the machine's cache
// instead of compiling everything again in every test process.
const tsxCache = `tsx-${process.geteuid?.() ?? 0}`
mkdirSync(join(systemTmp(), tsxCache), { recursive: true, mode: 0o700 })
symlinkSync(join(systemTmp(), tsxCache), join(root, tsxCache))
process.env.TMPDIR = root
process.once('exit', () => rmSync(root, { recursive: true, force: true, maxRetries: 3 }))
