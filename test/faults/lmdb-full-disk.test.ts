// The store fault chapter on the embedded LMDB store, with a real full disk (RLIMIT_FSIZE on the
// server process: see test/helpers/full-disk.ts).
import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fillDiskFor, unlimitFileSize } from '../helpers/full-disk.js'
import { storeFaultChapter } from './store-faults.chapter.js'

t.test('lmdb: a full disk during turns', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'burrow-full-'))
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const run = await storeFaultChapter(t, {
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
  })
  t.comment(JSON.stringify(run))
})
