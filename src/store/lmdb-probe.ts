import type { Database } from 'lmdb'

/**
 * A probe's writes: "writable" means a real amount of room, not one free page — LMDB reuses freed
 * pages, so a tiny write can succeed on a full disk while a turn's fails. About 1 MiB in 1 KB values
 * (a single failed 1 MiB value aborted lmdb-js inside a full file), written in one transaction and
 * removed in a second, so the pages really reach the file and stay free for the writes that follow.
 */
const PROBE_VALUES = 1024
const PROBE_VALUE = 'p'.repeat(1000)

/** The probe a WriteHealth of an LMDB environment runs (see core/write-health.ts). */
export function lmdbProbe(db: Database<unknown, string>): () => Promise<void> {
  return async () => {
    await db.transaction(() => {
      for (let i = 0; i < PROBE_VALUES; i++) void db.put(`__probe__${i}`, PROBE_VALUE)
    })
    await db.transaction(() => {
      for (let i = 0; i < PROBE_VALUES; i++) void db.remove(`__probe__${i}`)
    })
  }
}
