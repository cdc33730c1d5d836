// Saved HNSW index files are checked before hnswlib reads them: hnswlib trusts its input,
// and a damaged file could take the process down instead of failing a load.
import t from 'tap'
import { createHash } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DamagedIndexError, inspectIndexFile } from '../../src/memory/index-file.js'
import { TenantIndex } from '../../src/memory/hnsw-index.js'
import { scriptArgs } from '../helpers/burrow-bin.js'

const DIM = 32

/** A deterministic unit vector per label (no Math.random: failures must reproduce). */
function vector(label: number, dim = DIM): number[] {
  let x = label * 2654435761 + 1
  const v = Array.from({ length: dim }, () => {
    x = (x * 1103515245 + 12345) % 2 ** 31
    return x / 2 ** 31 - 0.5
  })
  const n = Math.hypot(...v)
  return v.map((c) => c / n)
}

function savedIndex(dir: string, key: string, labels: number, dim = DIM): string {
  const index = TenantIndex.create(dim)
  for (let l = 0; l < labels; l++) index.add(l, vector(l, dim))
  const prepared = index.write(dir, key)
  TenantIndex.install(dir, key, prepared)
  return join(dir, prepared.file)
}

const dir = mkdtempSync(join(tmpdir(), 'burrow-index-file-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const good = savedIndex(dir, 'good', 300)
const bytes = readFileSync(good)

t.test('a whole file passes, with its size, element count and sha256', async (t) => {
  const facts = inspectIndexFile(good, { dim: DIM, labelsBelow: 300 })
  t.same(facts, { bytes: bytes.length, elements: 300, sha256: createHash('sha256').update(bytes).digest('hex') })
  const loaded = TenantIndex.load(dir, 'good', DIM, { labelsBelow: 300 })!
  t.equal(loaded.covered, 300)
  t.equal(loaded.search(vector(42), 1)[0]!.label, 42, 'and it loads and searches')
})

/** Writes `content` as the file of key `key` (covering `covered` labels) and returns its path. */
function damaged(key: string, content: Buffer, covered = 300): string {
  const path = join(dir, `${key}.${covered}.bin`)
  writeFileSync(path, content)
  return path
}

function seededBytes(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n)
  let x = seed
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31
    b[i] = x >>> 16
  }
  return b
}

function patched(at: number, write: (b: Buffer) => void): Buffer {
  const b = Buffer.from(bytes)
  write(b.subarray(at))
  return b
}

// Header offsets of hnswlib's format (see src/memory/index-file.ts).
const MAX_ELEMENTS = 8
const HEADER = 96
const level0 = 2 * 16 * 4 + 4

const cases: Array<[string, Buffer, RegExp]> = [
  ['zero-length', Buffer.alloc(0), /shorter than the 96-byte header/],
  ['truncated in the header', bytes.subarray(0, 50), /shorter than the 96-byte header/],
  ['truncated in the data', bytes.subarray(0, Math.floor(bytes.length / 2)), /shorter than|ends inside/],
  ['truncated by one byte', bytes.subarray(0, bytes.length - 1), /ends inside|shorter than/],
  ['one byte too many', Buffer.concat([bytes, Buffer.alloc(1)]), /1 bytes after the last element/],
  ['random bytes', seededBytes(bytes.length, 7), /implausible|layout|shorter/],
  [
    'random bytes after a good header',
    Buffer.concat([bytes.subarray(0, HEADER), seededBytes(bytes.length - HEADER, 11)]),
    /links|label|upper-level|ends inside/,
  ],
  ['a huge capacity', patched(MAX_ELEMENTS, (b) => b.writeBigUInt64LE(1n << 40n)), /implausible capacity/],
  [
    'a link to an element that does not exist',
    patched(HEADER, (b) => {
      b.writeUInt16LE(1, 0)
      b.writeUInt32LE(300, 4)
    }),
    /links to an element that does not exist/,
  ],
  ['too many links', patched(HEADER, (b) => b.writeUInt16LE(level0, 0)), /more than 32/],
]

// The upper-level section: each element's level and where its level lists start.
const count = Number(bytes.readBigUInt64LE(16))
const perElement = Number(bytes.readBigUInt64LE(24))
const labelOffset = Number(bytes.readBigUInt64LE(32))
const upper: Array<{ level: number; at: number }> = []
for (let e = 0, at = HEADER + count * perElement; e < count; e++) {
  const n = bytes.readUInt32LE(at)
  upper.push({ level: n / (16 * 4 + 4), at: at + 4 })
  at += 4 + n
}
const high = upper.findIndex((u) => u.level >= 1)
const low = upper.findIndex((u) => u.level === 0)
cases.push(
  [
    'a label twice',
    patched(HEADER + perElement + labelOffset, (b) => b.writeBigUInt64LE(bytes.readBigUInt64LE(HEADER + labelOffset))),
    /label 0 appears twice/,
  ],
  ['an entry point below the top level', patched(52, (b) => b.writeUInt32LE(low)), /entry point \d+ is not at the top level/],
  [
    'an upper-level link to an element without that level',
    patched(upper[high]!.at, (b) => {
      b.writeUInt16LE(1, 0)
      b.writeUInt32LE(low, 4)
    }),
    /(links to element \d+, which has no level 1|is linked at level 1 but has no such level)/,
  ],
)

for (const [name, content, reason] of cases) {
  t.test(`damaged: ${name}`, async (t) => {
    const path = damaged(`k${cases.findIndex((c) => c[0] === name)}`, content)
    const err = t.throws(() => inspectIndexFile(path, { dim: DIM, labelsBelow: 300 })) as unknown
    t.type(err, DamagedIndexError)
    t.match((err as DamagedIndexError).reason, reason)
    t.equal((err as DamagedIndexError).file, path)
    const key = path.split('/').at(-1)!.split('.')[0]!
    t.throws(() => TenantIndex.load(dir, key, DIM, { labelsBelow: 300 }), DamagedIndexError, 'load refuses it before hnswlib reads it')
  })
}

t.test('damaged: built for another dimension', async (t) => {
  const other = savedIndex(dir, 'dim64', 20, 64)
  t.throws(() => inspectIndexFile(other, { dim: DIM, labelsBelow: 20 }), {
    name: 'DamagedIndexError',
    reason: /does not fit 32-dimensional vectors/,
  })
  t.throws(() => TenantIndex.load(dir, 'dim64', DIM, { labelsBelow: 20 }), DamagedIndexError)
})

t.test('damaged: labels beyond what the file (or LMDB) covers', async (t) => {
  copyFileSync(good, join(dir, 'fewer.100.bin'))
  t.throws(() => TenantIndex.load(dir, 'fewer', DIM, { labelsBelow: 300 }), {
    name: 'DamagedIndexError',
    reason: /label 100, beyond the 100/,
  })
  copyFileSync(good, join(dir, 'ahead.300.bin'))
  t.throws(() => TenantIndex.load(dir, 'ahead', DIM, { labelsBelow: 250 }), {
    name: 'DamagedIndexError',
    reason: /claims 300 labels, but only 250/,
  })
})

t.test("damaged: a whole file that is not the one recorded (another tenant's, an older one)", async (t) => {
  copyFileSync(good, join(dir, 'swapped.300.bin'))
  const record = { file: 'swapped.300.bin', sha256: createHash('sha256').update('something else').digest('hex') }
  t.throws(() => TenantIndex.load(dir, 'swapped', DIM, { labelsBelow: 300, record }), {
    name: 'DamagedIndexError',
    reason: /not the file last saved/,
  })
  t.ok(
    TenantIndex.load(dir, 'swapped', DIM, {
      labelsBelow: 300,
      record: { ...record, sha256: createHash('sha256').update(bytes).digest('hex') },
    }),
    'the recorded file loads',
  )
})

t.test('a short write on a full disk (hnswlib ignores write errors) is caught before the file is put in place', async (t) => {
  const out = mkdtempSync(join(tmpdir(), 'burrow-index-short-'))
  t.teardown(() => rmSync(out, { recursive: true, force: true }))
  const fixture = new URL('./fixtures/write-index.ts', import.meta.url).pathname
  const run = (fsize: string) =>
    JSON.parse(
      execFileSync('prlimit', [`--fsize=${fsize}`, process.execPath, ...scriptArgs(fixture, [out, '500'])], { encoding: 'utf8' }).trim(),
    )
  // 500 labels of 32 dimensions take about 250 kB; files stop growing at 20 kB.
  const short = run('20000:unlimited')
  t.equal(short.ok, false)
  t.match(short.error, /writing the memory index file limited\.500\.bin failed: .*\(disk full\?\)/)
  t.same(short.files, [], 'neither the short file nor its temp file is left')
  const whole = run('unlimited:unlimited')
  t.same(whole, { ok: true, files: ['limited.500.bin'] }, 'with room the same write succeeds')
})
