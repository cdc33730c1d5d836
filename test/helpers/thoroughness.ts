// How many times the repeated parts of a test run: kill -9 rounds, fast-check runs, fuzzed
// requests. `npm test` runs every test and assertion with small counts, for a suite that takes
// minutes; `npm run test:full` (BURROW_TEST_FULL=1) runs the full counts, as before CI ran the
// suite in minutes — run it before merging a change to what these tests cover.
export const FULL = process.env.BURROW_TEST_FULL === '1'

/** `quick` in `npm test`, `full` in `npm run test:full`; a number in `override` (a test's own variable) wins. */
export function rounds(quick: number, full: number, override?: string): number {
  if (override !== undefined && override !== '') {
    const n = Number(override)
    if (!Number.isInteger(n) || n < 1) throw new Error(`expected a positive whole number of rounds, not ${override}`)
    return n
  }
  return FULL ? full : quick
}
