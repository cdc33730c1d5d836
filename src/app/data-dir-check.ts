import { randomBytes } from 'node:crypto'
import { mkdir, open, readdir, stat, statfs, unlink } from 'node:fs/promises'
import { join } from 'node:path'
import type { Logger } from '../core/logger.js'
import { lmdbDamage } from '../store/lmdb-errors.js'
import { checkLmdbFile } from '../store/lmdb-preflight.js'
import { memoryStoreValues, sessionStoreValues } from '../store/lmdb-value-checks.js'
import type { Config } from './config.js'
import { StartupError } from './startup-error.js'

// Start-up checks of the data directory, run before anything in it is opened. LMDB maps its files
// and trusts them: a damaged or inaccessible file ends in SIGBUS/SIGSEGV rather than an error, so
// each way it can be unusable is found here first and refused with one line that says what to do.

/** The subdirectories Burrow writes, besides the data directory itself. */
const SUBDIRS = ['lmdb', 'memory', join('memory', 'lmdb'), join('memory', 'hnsw'), 'sessions']

/**
 * The data directory exists (created if not), is a directory, is writable by this process (proved
 * by creating a file: mode bits say nothing for root or on a read-only mount), and its file system
 * has at least `minFreeBytes` free.
 */
export async function checkDataDir(dir: string, minFreeBytes: number): Promise<void> {
  const kind = await entryKind(dir)
  if (kind === 'missing') {
    try {
      await mkdir(dir, { recursive: true })
    } catch (err) {
      throw new StartupError(
        `Cannot create the data directory ${dir} (${errno(err)}); create it or set BURROW_DATA_DIR to a writable directory.`,
      )
    }
  } else if (kind !== 'directory') {
    throw new StartupError(
      `The data directory ${dir} exists but is not a directory; set BURROW_DATA_DIR to a directory, or move ${dir} aside.`,
    )
  }
  for (const sub of ['', ...SUBDIRS]) {
    const path = sub ? join(dir, sub) : dir
    if (sub && (await entryKind(path)) !== 'directory') continue
    await probeWritable(path, dir)
  }
  if (minFreeBytes > 0) {
    const fs = await statfs(dir)
    const free = fs.bavail * fs.bsize
    if (free < minFreeBytes) throw diskFull(dir, `has ${mib(free)} free, less than BURROW_MIN_FREE_BYTES (${mib(minFreeBytes)})`)
  }
}

/** What the LMDB file checks found, for the empty-store check after the session store opens. */
export interface StoreFilesState {
  /** The session store had no data file (or an empty one) before it was opened. */
  sessionStoreAbsent: boolean
  /** Sessions projected under `sessions/`. */
  projectedSessions: number
}

/**
 * Checks every LMDB environment this configuration opens (the session store `lmdb/`, the memory
 * store `memory/lmdb/`): the files can be read and written, and `data.mdb` is intact. Then refuses a
 * missing session store in a directory that holds projected sessions, unless `allowEmptyStore`.
 * Memory alone is no sign of lost sessions: it is kept without the session store too
 * (BURROW_SESSION_STORE=off), and switching the store on later is a normal step. Call with the
 * data directory's lock held.
 */
export async function checkStoreFiles(config: Config, logger: Logger): Promise<StoreFilesState> {
  const dir = config.dataDir
  const envs: LmdbStore[] = [
    ...(config.sessionStore === 'lmdb' ? ['session store' as const] : []),
    ...(config.memoryStore === 'hnsw' ? ['memory store' as const] : []),
  ]
  let sessionStoreAbsent = false
  for (const what of envs) {
    const absent = await checkLmdbEnv(what, envDirOf(dir, what), logger)
    if (what === 'session store') sessionStoreAbsent = absent
  }
  const projectedSessions = await countProjections(dir)
  const state: StoreFilesState = { sessionStoreAbsent, projectedSessions }
  if (!state.sessionStoreAbsent || config.allowEmptyStore) return state
  if (projectedSessions > 0) {
    throw emptyStore(
      `The session store ${join(dir, 'lmdb', 'data.mdb')} is missing but ${join(dir, 'sessions')} holds ${projectedSessions} projected sessions`,
    )
  }
  return state
}

/**
 * Refuses a session store that opened with no sessions in a directory that holds projected sessions
 * (a store file replaced by an empty one): a deleted session's projection is deleted with it, so
 * projections without sessions mean the sessions were lost, not deleted.
 */
export async function checkStoreNotEmpty(config: Config, state: StoreFilesState, sessionIds: AsyncIterable<string>): Promise<void> {
  if (config.allowEmptyStore || state.sessionStoreAbsent || state.projectedSessions === 0) return
  for await (const id of sessionIds) {
    void id
    return
  }
  const store = join(config.dataDir, 'lmdb', 'data.mdb')
  throw emptyStore(
    `The session store ${store} holds no sessions but ${join(config.dataDir, 'sessions')} holds ${state.projectedSessions} projected sessions`,
  )
}

/** The LMDB environments start-up opens. */
export type LmdbStore = 'session store' | 'memory store'

function envDirOf(dataDir: string, what: LmdbStore): string {
  return what === 'session store' ? join(dataDir, 'lmdb') : join(dataDir, 'memory', 'lmdb')
}

/**
 * Runs a start-up read of an LMDB store (opening it, an upgrade, recovery): what LMDB throws about a
 * damaged file (MDB_CORRUPTED, MDB_PAGE_NOTFOUND, …: damage the pre-open check does not see, such as
 * a page past its budget) becomes the same refusal, naming the file, as damage found before opening.
 * Anything else is rethrown as it is.
 */
export async function readingStore<T>(dataDir: string, what: LmdbStore, read: () => Promise<T>): Promise<T> {
  try {
    return await read()
  } catch (err) {
    throw storeDamage(dataDir, what, err) ?? err
  }
}

/** The StartupError for an error LMDB threw about a damaged file of `what`, or `undefined` for any other error. */
export function storeDamage(dataDir: string, what: LmdbStore, err: unknown): StartupError | undefined {
  const said = lmdbDamage(err)
  return said ? damaged(what, envDirOf(dataDir, what), `is damaged: LMDB reports ${said}`, err) : undefined
}

function damaged(what: LmdbStore, envDir: string, problem: string, cause?: unknown): StartupError {
  const fresh =
    what === 'session store' ? 'with an empty store (and BURROW_ALLOW_EMPTY_STORE=true; its sessions are then gone)' : 'with empty memory'
  return new StartupError(
    `The ${what} file ${join(envDir, 'data.mdb')} ${problem}. Restore ${envDir} from a backup, or move it aside to start ${fresh}.`,
    cause === undefined ? undefined : { cause },
  )
}

/** Checks one LMDB environment directory; true when it has no data yet. */
async function checkLmdbEnv(what: LmdbStore, envDir: string, logger: Logger): Promise<boolean> {
  const data = join(envDir, 'data.mdb')
  const found = await checkLmdbFile(data, what === 'session store' ? sessionStoreValues() : memoryStoreValues())
  if (found.state === 'damaged') throw damaged(what, envDir, found.problem)
  if (found.state === 'unreadable') throw inaccessible(what, data, found.code)
  if (found.state === 'ok' && found.note) logger.warn({ file: data, txnid: String(found.txnid) }, `${what} file ${data}: ${found.note}`)
  if (found.state === 'ok' && found.walked.rootOnly.length > 0)
    logger.info(
      { file: data, pages_read: found.walked.reads, root_only: found.walked.rootOnly },
      `${what} file ${data}: checked ${found.walked.reads} pages; the largest databases only at their root (the start-up check's page budget)`,
    )
  // LMDB opens both files read-write; it cannot report a failure to, and crashes instead.
  for (const file of found.state === 'absent' ? [join(envDir, 'lock.mdb')] : [data, join(envDir, 'lock.mdb')]) {
    try {
      const fh = await open(file, 'r+')
      await fh.close()
    } catch (err) {
      if (errno(err) !== 'ENOENT') throw inaccessible(what, file, errno(err))
    }
  }
  return found.state === 'absent'
}

async function countProjections(dir: string): Promise<number> {
  try {
    return (await readdir(join(dir, 'sessions'))).filter((name) => !name.startsWith('.')).length
  } catch (err) {
    if (errno(err) === 'ENOENT' || errno(err) === 'ENOTDIR') return 0
    throw new StartupError(`Cannot read ${join(dir, 'sessions')} (${errno(err)}); give the user Burrow runs as${uid()} access to it.`)
  }
}

async function probeWritable(path: string, dataDir: string): Promise<void> {
  const probe = join(path, `.burrow-write-probe-${process.pid}-${randomBytes(4).toString('hex')}`)
  try {
    const fh = await open(probe, 'wx')
    await fh.close()
    await unlink(probe)
  } catch (err) {
    const code = errno(err)
    if (code === 'ENOSPC' || code === 'EDQUOT') throw diskFull(dataDir, `has no space left (${code})`)
    const fix = code === 'EROFS' ? 'remount it read-write' : `give the user Burrow runs as${uid()} write access`
    throw new StartupError(
      `The data directory ${path === dataDir ? dataDir : `${dataDir} (its ${path})`} is not writable (${code}); ${fix}, or set BURROW_DATA_DIR to a writable directory.`,
    )
  }
}

async function entryKind(path: string): Promise<'missing' | 'directory' | 'other'> {
  try {
    return (await stat(path)).isDirectory() ? 'directory' : 'other'
  } catch (err) {
    const code = errno(err)
    if (code === 'ENOENT') return 'missing'
    if (code === 'ENOTDIR') return 'other'
    throw new StartupError(
      `Cannot inspect ${path} (${code}); give the user Burrow runs as${uid()} access to it, or set BURROW_DATA_DIR to another directory.`,
    )
  }
}

function emptyStore(finding: string): StartupError {
  return new StartupError(
    `${finding}: BURROW_DATA_DIR may name the wrong directory, or the store was lost. Restore the store from a backup, or set BURROW_ALLOW_EMPTY_STORE=true to start with no sessions.`,
  )
}

function inaccessible(what: string, file: string, code: string): StartupError {
  return new StartupError(
    `The ${what} file ${file} cannot be opened for reading and writing (${code}); give the user Burrow runs as${uid()} read and write access to it.`,
  )
}

function diskFull(dir: string, finding: string): StartupError {
  return new StartupError(
    `The file system of the data directory ${dir} ${finding}; free space there or move the data directory to a larger disk (BURROW_DATA_DIR).`,
  )
}

function errno(err: unknown): string {
  return (err as NodeJS.ErrnoException | null)?.code ?? String(err)
}

function uid(): string {
  return process.getuid ? ` (uid ${process.getuid()})` : ''
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`
}
