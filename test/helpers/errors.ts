// Small assertions about failures, shared by the tests.
import type { Test } from 'tap'
import { BurrowError, type ErrorCode } from '../../src/core/errors.js'

/** What `p` rejects with; throws (failing the test) when it resolves instead. */
export async function caught(p: Promise<unknown>): Promise<unknown> {
  try {
    await p
  } catch (err) {
    return err
  }
  throw new Error('expected the promise to reject')
}

/** What `fn` throws; throws (failing the test) when it returns instead. */
export function thrown(fn: () => unknown): unknown {
  try {
    fn()
  } catch (err) {
    return err
  }
  throw new Error('expected a throw')
}

/** Asserts that `err` is a `BurrowError` with `code`, and narrows it for further checks. */
export function isCode(t: Test, err: unknown, code: ErrorCode): err is BurrowError {
  t.ok(err instanceof BurrowError, `a BurrowError (got ${String(err)})`)
  t.equal((err as BurrowError | undefined)?.code, code, err instanceof Error ? err.message : 'the code')
  return err instanceof BurrowError
}
