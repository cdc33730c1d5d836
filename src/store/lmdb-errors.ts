/**
 * lmdb-js 3.x rejects, for every failed commit (disk full, I/O error), the promises of the writes
 * in it — which we await — and also internal ones nobody can reach, made with this message and a
 * `commitError` promise holding the errno error. Those last are unhandled rejections by nature;
 * this tells them apart so the process can ignore exactly them (the failure itself reaches the
 * caller through the write's own promise, as STORE_UNAVAILABLE).
 */
export function isUnreachableLmdbRejection(reason: unknown): boolean {
  return reason instanceof Error && reason.message === 'Commit failed (see commitError for details)' && 'commitError' in reason
}

// LMDB's codes (lmdb.h) for a data file it cannot read as the snapshot it opened: a page missing or
// of the wrong kind, a database record that does not fit, a transaction poisoned by one of these.
const DAMAGE_CODES: ReadonlyMap<number, string> = new Map([
  [-30797, 'MDB_PAGE_NOTFOUND'],
  [-30796, 'MDB_CORRUPTED'],
  [-30795, 'MDB_PANIC'],
  [-30794, 'MDB_VERSION_MISMATCH'],
  [-30793, 'MDB_INVALID'],
  [-30787, 'MDB_CURSOR_FULL'],
  [-30784, 'MDB_INCOMPATIBLE'],
  [-30782, 'MDB_BAD_TXN'],
  [-30779, 'MDB_PROBLEM'],
  [-30778, 'MDB_BAD_CHECKSUM'],
])

/**
 * What LMDB said when it found its file damaged, as "MDB_CORRUPTED: Located page was wrong type";
 * `undefined` for any other error (also when it is the `cause` of one). lmdb-js throws these with
 * LMDB's code in `code` and mdb_strerror's text as the message.
 */
export function lmdbDamage(err: unknown): string | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const code = (e as Error & { code?: unknown }).code
    const name = typeof code === 'number' ? DAMAGE_CODES.get(code) : undefined
    if (name) return e.message.startsWith(name) ? e.message : `${name}: ${e.message}`
  }
  return undefined
}
