// A data directory that cannot hold data, a full disk, and a listen address that cannot be had
// each refuse start-up with exit 78 and one line naming the directory or address — no stack trace.
import t, { type Test } from 'tap'
import { chmod, chown, cp, mkdir, mkdtemp, open, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { startServer } from '../helpers/child-server.js'
import { assertRefused, assertStarts, canMount, copyDataDir, mount, startOn, umount, writeDataDir } from '../helpers/startup-faults.js'

const isRoot = process.getuid?.() === 0
const mountable = canMount()
const NOBODY = 65534

async function tempRoot(t: Test, prefix: string): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), prefix))
  await chmod(root, 0o755) // other users (the unprivileged child) may look inside
  t.teardown(() => rm(root, { recursive: true, force: true }))
  return root
}

/** Fills the file system holding `dir` until a 64 KiB write fails for lack of space. */
async function fill(dir: string): Promise<void> {
  const fh = await open(join(dir, 'filler'), 'w')
  const chunk = Buffer.alloc(64 * 1024, 1)
  try {
    for (;;) await fh.write(chunk)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err
  } finally {
    await fh.close()
  }
}

async function chownTree(path: string, uid: number, gid: number): Promise<void> {
  await chown(path, uid, gid)
  for (const e of await readdir(path, { withFileTypes: true })) {
    if (e.isDirectory()) await chownTree(join(path, e.name), uid, gid)
    else await chown(join(path, e.name), uid, gid)
  }
}

t.test('the data directory is a file', async (t) => {
  const root = await tempRoot(t, 'burrow-dirs-')
  const file = join(root, 'data')
  await writeFile(file, 'not a directory')
  await assertRefused(t, await startOn(file), [file])
  t.equal(await readFile(file, 'utf8'), 'not a directory', 'the file is untouched')
})

t.test('the data directory is not writable', async (t) => {
  t.test('permissions (as an unprivileged user: root ignores mode bits)', async (t) => {
    const root = await tempRoot(t, 'burrow-dirs-')
    const dir = join(root, 'data')
    await mkdir(dir)
    if (isRoot) {
      // Owned by root, mode 0755: the child, run as nobody, may read but not write it.
      await assertRefused(t, await startOn(dir, {}, { uid: NOBODY, gid: NOBODY }), [dir, 'EACCES'])
    } else {
      await chmod(dir, 0o555)
      t.teardown(() => chmod(dir, 0o755))
      await assertRefused(t, await startOn(dir), [dir, 'EACCES'])
    }
  })

  t.test('a read-only mount', { skip: mountable ? false : 'needs root and a kernel that lets this process mount a tmpfs' }, async (t) => {
    const root = await tempRoot(t, 'burrow-dirs-')
    const dir = join(root, 'data')
    await mkdir(dir)
    mount(dir, 'ro,size=1m')
    t.teardown(() => umount(dir))
    await assertRefused(t, await startOn(dir), [dir, 'EROFS'])
  })
})

t.test('a data directory holding real data', async (t) => {
  const template = await writeDataDir(t)

  // Any machine: the free-space floor is configurable, so a floor above any disk's size is a disk
  // too full for it. This checks the comparison, not a real full disk.
  t.test('a full disk: a floor above the free space (configured)', async (t) => {
    const dir = await copyDataDir(t, template)
    await assertRefused(t, await startOn(dir, { BURROW_MIN_FREE_BYTES: String(Number.MAX_SAFE_INTEGER) }), [dir, 'BURROW_MIN_FREE_BYTES'])
  })

  // A real full file system: a small tmpfs holding the real data, then filled up. Needs mount.
  t.test(
    'a full disk: a real full file system (tmpfs)',
    { skip: mountable ? false : 'needs root and a kernel that lets this process mount a tmpfs' },
    async (t) => {
      const root = await tempRoot(t, 'burrow-disk-')
      const mnt = join(root, 'mnt')
      await mkdir(mnt)
      mount(mnt, 'size=16m')
      t.teardown(() => umount(mnt))
      const dir = join(mnt, 'data')
      await cp(template, dir, { recursive: true })
      const floor = { BURROW_MIN_FREE_BYTES: String(4 * 1024 * 1024) }
      await assertStarts(t, await startOn(dir, floor))
      await fill(mnt)
      await assertRefused(t, await startOn(dir, floor), [dir])
    },
  )

  // LMDB cannot report that it may not write its lock file: it crashes (SIGSEGV).
  t.test("the store's lock file is not writable by this user", async (t) => {
    const dir = await copyDataDir(t, template)
    const lock = join(dir, 'lmdb', 'lock.mdb')
    if (isRoot) {
      // The directory is nobody's, the lock file root's (as after one start as root): run as nobody.
      await chmod(dirname(dir), 0o755)
      await chownTree(dir, NOBODY, NOBODY)
      await chown(lock, 0, 0)
      await assertRefused(t, await startOn(dir, {}, { uid: NOBODY, gid: NOBODY }), [lock, 'EACCES'])
    } else {
      await chmod(lock, 0o444)
      await assertRefused(t, await startOn(dir), [lock, 'EACCES'])
    }
  })
})

t.test('a listen address that cannot be had', async (t) => {
  t.test('the port is in use', async (t) => {
    const holder = net.createServer()
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r))
    t.teardown(() => new Promise<void>((r) => holder.close(() => r())))
    const port = (holder.address() as net.AddressInfo).port
    await assertRefused(t, await startServer({ PORT: String(port) }), [`127.0.0.1:${port}`, 'EADDRINUSE'])
  })

  t.test('the port is in use, with the stores open (they are closed, the data directory released)', async (t) => {
    const holder = net.createServer()
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r))
    t.teardown(() => new Promise<void>((r) => holder.close(() => r())))
    const port = (holder.address() as net.AddressInfo).port
    const root = await tempRoot(t, 'burrow-dirs-')
    const dir = join(root, 'data')
    await assertRefused(t, await startOn(dir, { PORT: String(port) }), [`127.0.0.1:${port}`])
    await assertStarts(t, await startOn(dir))
  })

  const unprivilegedStart = Number((await readFile('/proc/sys/net/ipv4/ip_unprivileged_port_start', 'utf8').catch(() => '1024')).trim())
  const skip = unprivilegedStart <= 80 ? 'this kernel lets anyone bind port 80' : false
  t.test('a privileged port, as an unprivileged user', { skip }, async (t) => {
    const asUser = isRoot ? { uid: NOBODY, gid: NOBODY } : {}
    await assertRefused(t, await startServer({ PORT: '80' }, asUser), ['127.0.0.1:80', 'EACCES'])
  })
})
