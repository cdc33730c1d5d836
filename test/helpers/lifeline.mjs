// Preloaded (`--import`) into every process the tests start (test/helpers/burrow-bin.ts): when the
// test process that started it is gone — a test file killed at its timeout or with kill -9 runs no
// teardown — the child kills itself within half a second instead of living on as an orphan.
// Plain JavaScript: it loads before (and without) any TypeScript loader.
const parent = process.ppid
setInterval(() => {
  if (process.ppid !== parent) process.kill(process.pid, 'SIGKILL')
}, 500).unref()
