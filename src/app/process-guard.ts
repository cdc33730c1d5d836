import type { Logger } from '../core/logger.js'
import { storeUnavailable } from '../core/errors.js'
import { isUnreachableLmdbRejection } from '../store/lmdb-errors.js'

/**
 * An unhandled rejection is a crash — except the ones lmdb-js makes, on a failed commit, of
 * promises no caller can reach (see isUnreachableLmdbRejection): a full disk must not kill the
 * process. Anything else is rethrown, which Node turns into an uncaught exception: the crash it
 * always was, with its stack.
 */
export function installProcessGuard(logger: Logger): void {
  // A file-size limit (RLIMIT_FSIZE) reached is a full disk by another name: the write fails with EFBIG and
  // is reported like ENOSPC. Node ignores SIGXFSZ, but a library's signal handler (signal-exit re-raises the
  // signals it watches when it is the only listener) would turn it back into a crash; this listener prevents that.
  process.on('SIGXFSZ', () => logger.debug({ signal: 'SIGXFSZ' }, 'a file reached the size limit; the write fails and is reported'))
  process.on('unhandledRejection', (reason) => {
    if (isUnreachableLmdbRejection(reason)) {
      storeUnavailable(reason, 'an LMDB commit') // observes its detail promise too
      logger.debug({ err: reason }, 'lmdb-js rejected an internal promise of a failed commit (the write itself was reported)')
      return
    }
    throw reason
  })
}
