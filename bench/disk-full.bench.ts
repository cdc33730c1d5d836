/**
 * A full disk under turns, through the API: a real server process (the LMDB store, fsync), then
 * RLIMIT_FSIZE stops its data file from growing (a real EFBIG inside LMDB, the ENOSPC path), at least
 * 100 turns are tried while it lasts, then the limit is lifted. Runs the store fault chapter of the
 * test suite (test/faults/store-faults.chapter.ts) ROUNDS times, collecting its checks instead of asserting.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fillDiskFor, unlimitFileSize } from '../test/helpers/full-disk.js'
import { storeFaultChapter, type Checks, type FaultRun } from '../test/faults/store-faults.chapter.js'
import { metric, target, type BenchResult } from './lib/types.js'

const ROUNDS = Number(process.env.BENCH_DISK_FULL_ROUNDS ?? 5)
const TURNS = 100

export async function run(): Promise<BenchResult> {
  const t0 = Date.now()
  const runs: FaultRun[] = []
  const failures: string[] = []
  for (let i = 0; i < ROUNDS; i++) {
    const dataDir = await mkdtemp(join(tmpdir(), 'burrow-bench-full-'))
    const teardowns: Array<() => unknown> = []
    const checks: Checks = {
      ok: (v, msg) => {
        if (!v) failures.push(String(msg))
      },
      equal: (a, b, msg) => {
        if (a !== b) failures.push(`${String(msg)}: ${String(a)} !== ${String(b)}`)
      },
      same: (a, b, msg) => {
        if (JSON.stringify(a) !== JSON.stringify(b)) failures.push(String(msg))
      },
      fail: (msg) => {
        failures.push(String(msg))
      },
      comment: () => undefined,
      teardown: (fn) => {
        teardowns.push(fn)
      },
    }
    try {
      runs.push(
        await storeFaultChapter(
          checks,
          {
            name: 'lmdb',
            env: {
              BURROW_SESSION_STORE: 'lmdb',
              BURROW_MEMORY_STORE: 'off',
              BURROW_COMPACTION: 'off',
              BURROW_DATA_DIR: dataDir,
              BURROW_DURABILITY: 'fsync',
            },
            async breakStore(server) {
              fillDiskFor(server.child.pid!, join(dataDir, 'lmdb', 'data.mdb'))
            },
            async healStore(server) {
              unlimitFileSize(server.child.pid!)
            },
          },
          TURNS,
        ),
      )
    } finally {
      for (const fn of teardowns.reverse()) await fn()
      await rm(dataDir, { recursive: true, force: true })
    }
  }
  const turns = runs.reduce((n, r) => n + r.turnsWhileBroken, 0)
  const exits = runs.reduce((n, r) => n + r.exits, 0)
  const lost = runs.reduce((n, r) => n + r.lost, 0)
  const recovery = runs.map((r) => r.recoveryMs).sort((a, b) => a - b)
  const maxRecovery = recovery.at(-1) ?? Infinity
  const targets = [
    target('process exits during the full-disk runs', exits, '<=', 0, 'exits'),
    target('turns tried while the disk was full (all rounds)', turns, '>=', 100, 'turns'),
    target('space freed → /readyz 200, worst round', maxRecovery / 1000, '<=', 5, 's'),
    target('acknowledged turns lost', lost, '<=', 0, 'turns'),
    target('failed checks of the fault chapter', failures.length, '<=', 0, 'checks'),
  ]
  return {
    name: 'disk-full',
    title: 'Full disk under turns: no exit, STORE_UNAVAILABLE, readiness back by itself',
    description:
      'A real server process on LMDB (fsync). Its data file is capped at its current size with RLIMIT_FSIZE (`prlimit`), which makes LMDB writes fail with EFBIG exactly as on a full disk; at least 100 turns (2 KB inputs, four sessions) are tried while it lasts, with reads and `/readyz` checked along the way; then the cap is lifted and the time until `/readyz` answers 200 is measured; each session then takes a turn, and a fresh process on the same data directory must hold every acknowledged turn. The test suite runs the same chapter once (test/faults/lmdb-full-disk.test.ts).',
    config: { rounds: ROUNDS, 'turns per round while full': TURNS, durability: 'fsync', 'probe interval': '1 s' },
    metrics: [
      metric('turns tried while full, all rounds', turns, 'turns'),
      metric(
        'of which refused with STORE_UNAVAILABLE',
        runs.reduce((n, r) => n + r.refused, 0),
        'turns',
      ),
      metric('process exits', exits, 'exits'),
      metric('space freed → ready, median', recovery[Math.floor(recovery.length / 2)] ?? NaN, 'ms'),
      metric('space freed → ready, worst', maxRecovery, 'ms'),
      metric(
        'acknowledged turns checked after restart',
        runs.reduce((n, r) => n + r.acknowledged, 0),
        'turns',
      ),
    ],
    targets,
    pass: targets.every((x) => x.pass),
    notes: failures.length
      ? [`Failed checks: ${failures.slice(0, 10).join('; ')}`]
      : ['Every check of the fault chapter held in every round.'],
    date: new Date().toISOString(),
    durationSeconds: (Date.now() - t0) / 1000,
  }
}
