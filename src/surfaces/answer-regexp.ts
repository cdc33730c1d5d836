import { RE2 } from 're2-wasm'

/**
 * The regular-expression engine of clients' answer schemas (`response_format`): RE2, whose
 * matching time is linear in the input, from `re2-wasm` (Google's build of RE2 as WebAssembly: no
 * native compilation, no download). With JavaScript's backtracking engine a client's `pattern`
 * such as `^(a+)+$` takes exponential time on the model's answer and stalls the event loop for
 * every tenant of the service. RE2 has no backreferences and no lookaround: a schema using them
 * does not compile, and the request is refused with the field (docs/api.md).
 *
 * The compiled program lives in WebAssembly memory, which the garbage collector does not see:
 * it is freed when the JavaScript object that wraps it is collected.
 */
const freed = new FinalizationRegistry<{ delete(): void }>((program) => program.delete())

export function re2RegExp(pattern: string, flags: string): RE2 {
  // re2-wasm requires the `u` flag (Ajv passes it, as JSON Schema patterns are Unicode).
  const re = new RE2(pattern, flags.includes('u') ? flags : `${flags}u`)
  // The package keeps the program in a private field; if a release renames it, the program is not freed (a leak), never a crash.
  const program = (re as unknown as { wrapper?: { delete?: () => void } }).wrapper
  if (typeof program?.delete === 'function') freed.register(re, program as { delete(): void })
  return re
}
/** What Ajv writes into standalone code for this engine (never used here: schemas are compiled at run time). */
re2RegExp.code = 'new (require("re2-wasm").RE2)'
