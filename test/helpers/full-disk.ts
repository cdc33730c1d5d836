// A real "disk full" for a running server process, without root: RLIMIT_FSIZE caps how large a file the
// process may grow (Node ignores SIGXFSZ, so a write past it fails with EFBIG, which LMDB reports as an
// I/O error — the same path as ENOSPC). Raising the limit again is "space freed". lmdb-js grows its map
// by itself, so a small map size would not reproduce a full disk.
import { execFileSync } from 'node:child_process'
import { statSync } from 'node:fs'

/** Whether `prlimit` (util-linux) is installed: the full-disk tests need it. */
export const hasPrlimit = (() => {
  try {
    execFileSync('prlimit', ['--version'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
})()

/** Caps the size any file of process `pid` may reach (bytes). */
export function limitFileSize(pid: number, bytes: number): void {
  execFileSync('prlimit', ['--pid', String(pid), `--fsize=${bytes}:unlimited`])
}

/** Lifts the cap again. */
export function unlimitFileSize(pid: number): void {
  execFileSync('prlimit', ['--pid', String(pid), '--fsize=unlimited:unlimited'])
}

/** "The disk is full now": the process may not grow `file` (nor any other file) past its current size. */
export function fillDiskFor(pid: number, file: string): void {
  limitFileSize(pid, statSync(file).size)
}
