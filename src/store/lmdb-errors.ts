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
