// Preloaded (`--import`) into every process the tests start (test/helpers/burrow-bin.ts): when the
// test process that started it is gone — a test file killed at its timeout or with kill -9 runs no
// teardown — the child kills itself within half a second instead of living on as an orphan. The
// parent's pid comes in the module's URL (`?parent=`), so a parent that died before this module
// loaded is noticed too. Plain JavaScript: it loads before (and without) any TypeScript loader.
const parent = Number(new URL(import.meta.url).searchParams.get('parent'))
const orphaned = () => process.ppid !== parent
if (orphaned()) process.kill(process.pid, 'SIGKILL')
setInterval(() => {
  if (orphaned()) process.kill(process.pid, 'SIGKILL')
}, 500).unref()
