// The session-service contract, in process (no HTTP), against the compositions of
// LocalSessionService that app/ builds: ephemeral (the null repository), LMDB and PostgreSQL
// (a database of its own per composition, on the server at 127.0.0.1:5432).
import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/app/config.js'
import { createLogger } from '../../src/app/logger.js'
import { buildService } from '../../src/app/service.js'
import type { EventEnvelope } from '../../src/core/events.js'
import { NO_TELEMETRY } from '../../src/core/telemetry.js'
import { IDEMPOTENCY_TTL_MS } from '../../src/session/idempotency.js'
import { applyEvent } from '../../src/session/session-reducer.js'
import type { SessionRepository } from '../../src/core/stores.js'
import { LmdbSessionRepository } from '../../src/store/lmdb-session-repository.js'
import { PgSessionRepository } from '../../src/store/pg-session-repository.js'
import { sessionServiceContract, type ServiceUnderTest } from '../contract/session-service.contract.js'
import { startFakeLlm } from '../helpers/fake-llm-server.js'
import { tempDatabase, type TempDatabase } from '../helpers/pg.js'

const fake = await startFakeLlm({ openaiKey: 'sk-test' })
const dirs: string[] = []
const databases: TempDatabase[] = []
t.teardown(async () => {
  await fake.close()
  for (const d of dirs) await rm(d, { recursive: true, force: true })
  for (const db of databases) await db.drop()
})

type Store = 'off' | 'lmdb' | 'postgres'

async function compose(store: Store, env: Record<string, string>, dataDir?: string, database?: TempDatabase): Promise<ServiceUnderTest> {
  const dir = dataDir ?? (await mkdtemp(join(tmpdir(), 'burrow-service-')))
  if (!dataDir) dirs.push(dir)
  const db = store === 'postgres' ? (database ?? (await tempDatabase(undefined, 'service'))) : undefined
  if (db && !database) databases.push(db)
  const config = loadConfig({
    BURROW_DATA_DIR: dir,
    LOG_LEVEL: 'silent',
    BURROW_SESSION_STORE: store,
    BURROW_MEMORY_STORE: 'off',
    BURROW_COMPACTION: 'on',
    OPENAI_API_KEY: 'sk-test',
    OPENAI_BASE_URL: `${fake.url}/v1`,
    BURROW_PROVIDER_RETRY_BASE_MS: '5',
    BURROW_PROVIDER_RETRY_MAX_MS: '20',
    BURROW_DEFAULT_MODEL: 'offline:echo',
    ...(db ? { BURROW_DATABASE_URL: db.url, BURROW_PG_POOL_SIZE: '4', BURROW_REPLICA_ID: 'contract' } : {}),
    ...env,
  })
  const built = await buildService(config, { logger: createLogger('silent'), telemetry: NO_TELEMETRY, version: 'test' })
  let closing: Promise<void> | null = null
  const close = () => (closing ??= built.close())
  const durable = store !== 'off'
  return {
    service: built.service,
    persistent: durable,
    fake,
    close,
    async idle() {
      await built.indexer?.idle()
      await built.projector?.idle()
    },
    restart: durable
      ? async () => {
          await close()
          return compose(store, env, dir, db)
        }
      : undefined,
    crashMidTurn: durable ? (id) => crashMidTurn(() => openRepository(dir, db), id) : undefined,
  }
}

/** The composition's repository, opened on its own (the service closed). */
function openRepository(dir: string, db: TempDatabase | undefined): Promise<SessionRepository> {
  // The service's replica id: the process that "crashed" is the one that starts again.
  if (db) return PgSessionRepository.open({ url: db.url, poolSize: 2, replicaId: 'contract', idempotencyTtlMs: IDEMPOTENCY_TTL_MS })
  return LmdbSessionRepository.open(dir, { durability: 'fsync', idempotencyTtlMs: IDEMPOTENCY_TTL_MS, fold: applyEvent })
}

/** What a process killed in the middle of a turn leaves in the log: the turn's start (under the session's lease, never released), and nothing after it. */
async function crashMidTurn(open: () => Promise<SessionRepository>, id: string): Promise<void> {
  const repo = await open()
  try {
    const record = (await repo.sessions.get(id))!
    const e: EventEnvelope<'turn_started'> = {
      seq: record.last_seq + 1,
      session_id: id,
      turn: record.turn_count + 1,
      type: 'turn_started',
      at: new Date().toISOString(),
      data: { input: [{ type: 'text', text: 'cut off' }], continuation: false },
    }
    const lease = await repo.leases?.acquire(id, record.config.tenant)
    await repo.commit([e], applyEvent(record, e), lease && 'token' in lease ? lease.token : 0)
  } finally {
    await repo.close()
  }
}

t.test('ephemeral composition (null repository)', async (t) => {
  sessionServiceContract(t, (env = {}) => compose('off', env))
})

t.test('LMDB composition', async (t) => {
  sessionServiceContract(t, (env = {}) => compose('lmdb', env))
})

t.test('PostgreSQL composition', async (t) => {
  sessionServiceContract(t, (env = {}) => compose('postgres', env))
})
