// Damaged LMDB files refuse start-up with exit 78 and one line naming the file, instead of the
// SIGBUS/SIGSEGV that mapping them gives: a truncated data.mdb, zeroed meta pages, random bytes,
// each in the session store and in the memory store. The files are the real server's, damaged in
// copies; the untouched copy starts (the checks do not refuse what the real server writes).
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { open, stat, truncate } from 'node:fs/promises'
import { join } from 'node:path'
import { assertRefused, assertStarts, copyDataDir, startOn, writeDataDir } from '../helpers/startup-faults.js'

/** LMDB's page size for this file, from meta page 0 (lmdb-js uses the OS page size). */
async function pageSize(file: string): Promise<number> {
  const fh = await open(file, 'r')
  try {
    const b = Buffer.alloc(4)
    await fh.read(b, 0, 4, 24 + 24) // page header, then MDB_meta up to mm_dbs[0].md_pad
    return b.readUInt32LE(0)
  } finally {
    await fh.close()
  }
}

async function overwrite(file: string, at: number, bytes: Buffer): Promise<void> {
  const fh = await open(file, 'r+')
  try {
    await fh.write(bytes, 0, bytes.length, at)
  } finally {
    await fh.close()
  }
}

const DAMAGE: Record<string, (file: string) => Promise<void>> = {
  'truncated to half': async (f) => truncate(f, Math.floor((await stat(f)).size / 2)),
  'zeroed meta pages': async (f) => overwrite(f, 0, Buffer.alloc(2 * (await pageSize(f)))),
  'random bytes': async (f) => overwrite(f, 0, randomBytes((await stat(f)).size)),
}

const STORES = { 'session store': ['lmdb'], 'memory store': ['memory', 'lmdb'] }

t.test('damaged LMDB files refuse start-up, naming the file', async (t) => {
  const template = await writeDataDir(t)

  t.test('the undamaged copy starts', async (t) => {
    const dir = await copyDataDir(t, template)
    await assertStarts(t, await startOn(dir))
  })

  t.test('session store: meta page 1 zeroed, which LMDB ignores: starts, with a warning naming the file', async (t) => {
    const dir = await copyDataDir(t, template)
    const file = join(dir, 'lmdb', 'data.mdb')
    const ps = await pageSize(file)
    await overwrite(file, ps, Buffer.alloc(ps))
    const out = await startOn(dir)
    const lines = out.kind === 'listening' ? out.server.lines : []
    await assertStarts(t, out)
    t.ok(
      lines.some((l) => l.level === 40 && l.file === file),
      'a warning names the file',
    )
  })

  for (const [store, path] of Object.entries(STORES)) {
    for (const [damage, apply] of Object.entries(DAMAGE)) {
      t.test(`${store}: ${damage}`, async (t) => {
        const dir = await copyDataDir(t, template)
        const file = join(dir, ...path, 'data.mdb')
        await apply(file)
        const before = await stat(file)
        const line = await assertRefused(t, await startOn(dir), [file])
        t.ok(line.includes('backup'), 'says to restore from a backup')
        const after = await stat(file)
        t.same([after.size, after.mtimeMs], [before.size, before.mtimeMs], 'the damaged file is left as it was')
      })
    }
  }
})
