import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * The service environment every benchmark starts Burrow with — the one place to
 * switch capabilities on. Today only the ephemeral build exists; when the session
 * store / memory store / compaction land, flip the switches here (or per run with
 * `BENCH_BURROW_ENV='{"BURROW_SESSION_STORE":"lmdb"}' npx tsx bench/run.ts`).
 * `BURROW_DATA_DIR` is a fresh temp directory per run so a persistent build never
 * reads a previous run's data.
 */
export const BURROW_ENV: Record<string, string> = {
  HOST: '127.0.0.1',
  PORT: '0',
  BURROW_SESSION_STORE: 'off',
  BURROW_MEMORY_STORE: 'off',
  BURROW_COMPACTION: 'off',
  LOG_LEVEL: 'silent',
}

/** BURROW_ENV + per-benchmark settings + the JSON overrides in BENCH_BURROW_ENV, with a fresh data dir. */
export function burrowEnv(extra: Record<string, string> = {}): Record<string, string> {
  let overrides: Record<string, string> = {}
  const raw = process.env.BENCH_BURROW_ENV
  if (raw) {
    const parsed: unknown = JSON.parse(raw)
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('BENCH_BURROW_ENV must be a JSON object')
    overrides = Object.fromEntries(Object.entries(parsed).map(([k, v]) => [k, String(v)]))
  }
  return { BURROW_DATA_DIR: mkdtempSync(join(tmpdir(), 'burrow-bench-')), ...BURROW_ENV, ...extra, ...overrides }
}

/** The capability switches of an env, for the report. */
export function capabilitySummary(env: Record<string, string>): string {
  return ['BURROW_SESSION_STORE', 'BURROW_MEMORY_STORE', 'BURROW_COMPACTION'].map((k) => `${k}=${env[k] ?? '(default)'}`).join(', ')
}
