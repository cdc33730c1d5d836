// Run by tap after the test files (`after` in package.json's tap config), and runnable alone
// (npx tsx test/helpers/leftovers.ts): removes what test processes that are gone left behind —
// their temporary directories and their PostgreSQL databases. A test cleans up in its teardown;
// a test file killed at its timeout (or with kill -9) never finishes it. Whatever belongs to a
// process still running (a suite in another checkout) is left alone.
import { readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { alive, systemTmp, TEST_DB_NAME, TEST_ROOT_PREFIX } from './leftovers-names.js'
import { adminQuery } from './pg.js'

const tmp = systemTmp()
const removed: string[] = []
for (const name of readdirSync(tmp)) {
  const pid = name.startsWith(TEST_ROOT_PREFIX) ? Number(name.slice(TEST_ROOT_PREFIX.length)) : NaN
  if (Number.isInteger(pid) && pid !== process.pid && !alive(pid)) {
    rmSync(join(tmp, name), { recursive: true, force: true, maxRetries: 3 })
    removed.push(join(tmp, name))
  }
}
try {
  const dbs = await adminQuery(`SELECT datname FROM pg_database WHERE datname LIKE 'burrow\\_test\\_%'`)
  for (const { datname } of dbs.rows as Array<{ datname: string }>) {
    const m = TEST_DB_NAME.exec(datname)
    if (m && !alive(Number(m[1]))) {
      await adminQuery(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`)
      removed.push(`database ${datname}`)
    }
  }
} catch (err) {
  console.error(`leftovers: PostgreSQL not reachable, test databases not checked (${(err as Error).message})`)
}
if (removed.length > 0) console.error(`leftovers of test processes that are gone, removed: ${removed.join(', ')}`)
