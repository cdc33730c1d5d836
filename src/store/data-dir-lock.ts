import { createHash } from 'node:crypto'
import { realpathSync } from 'node:fs'
import { unlink } from 'node:fs/promises'
import net from 'node:net'
import { join } from 'node:path'

export class DataDirLockedError extends Error {
  constructor(dir: string) {
    super(
      `The data directory ${dir} is in use by another Burrow process. Stop it, use another BURROW_DATA_DIR, or talk to the running server over HTTP.`,
    )
    this.name = 'DataDirLockedError'
  }
}

/**
 * One process per data directory. The lock is a unix socket the owner listens on:
 * the kernel frees it when the owner dies (even by kill -9), so a stale lock is told
 * apart from a live one by trying to connect. On Linux the socket lives in the
 * abstract namespace when the directory path is too long for a socket path.
 */
export class DataDirLock {
  private constructor(
    private readonly server: net.Server,
    private readonly path: string | null,
  ) {}

  static async acquire(dir: string): Promise<DataDirLock> {
    const real = realpathSync(dir)
    const filePath = join(real, 'burrow.lock.sock')
    const path = Buffer.byteLength(filePath) < 100 ? filePath : `\0burrow-${createHash('sha256').update(real).digest('hex').slice(0, 32)}`
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const server = await listen(path)
        return new DataDirLock(server, path.startsWith('\0') ? null : path)
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err
        if (await alive(path)) throw new DataDirLockedError(dir)
        if (!path.startsWith('\0')) await unlink(path).catch(() => undefined) // stale: its owner is gone
      }
    }
    throw new DataDirLockedError(dir)
  }

  async release(): Promise<void> {
    await new Promise<void>((r) => this.server.close(() => r()))
    if (this.path) await unlink(this.path).catch(() => undefined)
  }
}

function listen(path: string): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const server = net.createServer((socket) => socket.end())
    server.once('error', reject)
    server.listen(path, () => {
      server.off('error', reject)
      server.unref()
      resolve(server)
    })
  })
}

function alive(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(path)
    s.once('connect', () => {
      s.destroy()
      resolve(true)
    })
    s.once('error', () => resolve(false))
  })
}
