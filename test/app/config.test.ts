import t from 'tap'
import { readFileSync } from 'node:fs'
import { ConfigError, loadConfig } from '../../src/app/config.js'

t.test('defaults are those of docs/configuration.md', async (t) => {
  const c = loadConfig({})
  t.equal(c.host, '127.0.0.1')
  t.equal(c.port, 8080)
  t.equal(c.dataDir, './data')
  t.equal(c.sessionStore, 'lmdb')
  t.equal(c.memoryStore, 'hnsw')
  t.equal(c.compaction, true)
  t.equal(c.durability, 'fsync')
  t.equal(c.logLevel, 'info')
  t.equal(c.anthropic.baseUrl, 'https://api.anthropic.com')
  t.equal(c.openai.baseUrl, 'https://api.openai.com/v1')
  t.equal(c.openai.configured, false)
  t.equal(c.apiKeys.size, 0)
  t.equal(c.corsOrigins, undefined)
  t.same(c.compactionDefaults, {
    auto_compact_threshold: 100_000,
    recent_turn_budget: 4,
    max_summary_tokens: 4096,
    min_turns_between_compactions: 3,
    max_history_messages: null,
  })
})

t.test('values are parsed and checked', async (t) => {
  const c = loadConfig({
    PORT: '9000',
    BURROW_API_KEYS: 'k1:alpha, k2:beta',
    OPENAI_BASE_URL: 'http://localhost:11434/v1/',
    BURROW_CORS_ORIGINS: 'https://a.example, https://b.example',
    BURROW_SESSION_STORE: 'off',
    BURROW_DURABILITY: 'relaxed',
  })
  t.equal(c.port, 9000)
  t.same(
    [...c.apiKeys],
    [
      ['k1', 'alpha'],
      ['k2', 'beta'],
    ],
  )
  t.equal(c.openai.baseUrl, 'http://localhost:11434/v1')
  t.equal(c.openai.configured, true, 'a base URL alone configures a keyless compatible server')
  t.same(c.corsOrigins, ['https://a.example', 'https://b.example'])
  t.equal(c.durability, 'relaxed')
})

t.test('every bad variable is reported at once, by name, without echoing secrets', async (t) => {
  try {
    loadConfig({
      PORT: 'eighty',
      BURROW_SESSION_STORE: 'cassandra',
      BURROW_API_KEYS: 'secretkey-without-tenant',
      OPENAI_BASE_URL: 'ftp://x',
      LOG_LEVEL: 'loud',
      BURROW_DEFAULT_MODEL: 'gpt4',
    })
    t.fail('should throw')
  } catch (err) {
    t.type(err, ConfigError)
    const e = err as ConfigError
    t.equal(e.problems.length, 6)
    for (const name of ['PORT', 'BURROW_SESSION_STORE', 'BURROW_API_KEYS', 'OPENAI_BASE_URL', 'LOG_LEVEL', 'BURROW_DEFAULT_MODEL']) {
      t.ok(
        e.problems.some((p) => p.startsWith(name)),
        name,
      )
    }
    t.notMatch(e.message, /secretkey/, 'the key is not printed')
  }
})

t.test('the PostgreSQL store needs a postgres:// URL, whose password is never echoed', async (t) => {
  const problems = (env: Record<string, string>) => {
    try {
      loadConfig(env)
      return []
    } catch (err) {
      return (err as ConfigError).problems
    }
  }
  const missing = problems({ BURROW_SESSION_STORE: 'postgres' })
  t.equal(missing.length, 1)
  t.match(missing[0], /^BURROW_DATABASE_URL must be set/)
  const wrong = problems({ BURROW_SESSION_STORE: 'postgres', BURROW_DATABASE_URL: 'http://u:hunter2@db/x' })
  t.equal(wrong.length, 1, 'one problem: the URL, not also its absence')
  t.match(wrong[0], /^BURROW_DATABASE_URL must be a postgres:\/\/ URL/)
  t.notMatch(wrong[0], /hunter2/)
  const c = loadConfig({
    BURROW_SESSION_STORE: 'postgres',
    BURROW_DATABASE_URL: 'postgres://u:pw@db:5433/burrow',
    BURROW_REPLICA_ID: 'r1',
    BURROW_LEASE_MS: '5000',
    BURROW_PG_POOL_SIZE: '3',
  })
  t.equal(c.sessionStore, 'postgres')
  t.equal(c.databaseUrl, 'postgres://u:pw@db:5433/burrow')
  t.equal(c.replicaId, 'r1')
  t.equal(c.leaseMs, 5000)
  t.equal(c.pgPoolSize, 3)
  const d = loadConfig({})
  t.equal(d.sessionStore, 'lmdb', 'the default needs no database')
  t.equal(d.databaseUrl, undefined)
  t.ok(d.leaseMs <= 10_000, 'a lease of at most 10 s by default')
  t.match(d.replicaId, new RegExp(`-${process.pid}$`), 'host and pid by default')
})

t.test('BURROW_PROJECTION: on by default with LMDB, off with PostgreSQL, and checked', async (t) => {
  const pgEnv = { BURROW_SESSION_STORE: 'postgres', BURROW_DATABASE_URL: 'postgres://u@db/burrow' }
  t.equal(loadConfig({}).projection, true, 'LMDB: on')
  t.equal(loadConfig(pgEnv).projection, false, 'PostgreSQL: off')
  t.equal(loadConfig({ BURROW_SESSION_STORE: 'off' }).projection, false, 'no store: nothing to project')
  t.equal(loadConfig({ ...pgEnv, BURROW_PROJECTION: 'on' }).projection, true)
  t.equal(loadConfig({ BURROW_PROJECTION: 'off' }).projection, false)
  t.equal(loadConfig({ BURROW_SESSION_STORE: 'off', BURROW_PROJECTION: 'off' }).projection, false)
  const problems = (env: Record<string, string>) => {
    try {
      loadConfig(env)
    } catch (err) {
      t.type(err, ConfigError)
      return (err as ConfigError).problems
    }
    return ['(accepted)']
  }
  t.same(problems({ ...pgEnv, BURROW_PROJECTION: 'yes' }), ["BURROW_PROJECTION must be one of on, off (got 'yes')"])
  t.same(problems({ BURROW_SESSION_STORE: 'off', BURROW_PROJECTION: 'on' }), [
    'BURROW_PROJECTION=on needs a session store (BURROW_SESSION_STORE=lmdb or postgres): the projection is written from it',
  ])
})

t.test('.env.example lists every variable the service reads, with its default', async (t) => {
  const source = readFileSync(new URL('../../src/app/config.ts', import.meta.url), 'utf8')
  const read = new Set([...source.matchAll(/r\.\w+\('([A-Z][A-Z0-9_]+)'/g)].map((m) => m[1]!))
  const example = readFileSync(new URL('../../.env.example', import.meta.url), 'utf8')
  const listed = new Set([...example.matchAll(/^#?\s*([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1]!))
  t.ok(read.size > 20)
  t.same(
    [...read].filter((v) => !listed.has(v)),
    [],
    'read but not in .env.example',
  )
  t.same(
    [...listed].filter((v) => !read.has(v)),
    [],
    'in .env.example but never read',
  )
})

t.test('start-up checks: BURROW_ALLOW_EMPTY_STORE and BURROW_MIN_FREE_BYTES', async (t) => {
  const d = loadConfig({})
  t.equal(d.allowEmptyStore, false, 'a missing or empty store beside projections is refused by default')
  t.equal(d.minFreeBytes, 64 * 1024 * 1024)
  const c = loadConfig({ BURROW_ALLOW_EMPTY_STORE: 'true', BURROW_MIN_FREE_BYTES: '0' })
  t.equal(c.allowEmptyStore, true)
  t.equal(c.minFreeBytes, 0, '0 turns the free-space check off')
  try {
    loadConfig({ BURROW_ALLOW_EMPTY_STORE: 'yes', BURROW_MIN_FREE_BYTES: '-1' })
    t.fail('should throw')
  } catch (err) {
    t.type(err, ConfigError)
    t.same(
      (err as ConfigError).problems.map((p) => p.split(' ')[0]),
      ['BURROW_ALLOW_EMPTY_STORE', 'BURROW_MIN_FREE_BYTES'],
    )
  }
})

t.test('BURROW_EMBEDDINGS_URL overrides BURROW_EMBEDDER, and says what it overrode', async (t) => {
  const both = loadConfig({ BURROW_EMBEDDER: 'use-lite', BURROW_EMBEDDINGS_URL: 'http://127.0.0.1:9/v1', BURROW_EMBEDDINGS_MODEL: 'm' })
  t.equal(both.embedder, 'endpoint')
  t.equal(both.embedderOverridden, 'use-lite')
  const urlOnly = loadConfig({ BURROW_EMBEDDINGS_URL: 'http://127.0.0.1:9/v1', BURROW_EMBEDDINGS_MODEL: 'm' })
  t.equal(urlOnly.embedder, 'endpoint')
  t.equal(urlOnly.embedderOverridden, undefined)
  t.equal(loadConfig({ BURROW_EMBEDDER: 'use-lite' }).embedder, 'use-lite')
  t.equal(loadConfig({}).embedder, 'hashed')
})

t.test('tracing: the standard OTEL_ variables; off without an endpoint', async (t) => {
  t.equal(loadConfig({}).tracing, undefined, 'no endpoint: tracing off')
  t.same(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318/' }).tracing, {
    url: 'http://127.0.0.1:4318/v1/traces',
    headers: {},
    serviceName: 'burrow',
    sampler: 'parentbased_always_on',
    samplerRatio: 1,
    batch: { scheduleDelayMs: 5000, exportTimeoutMs: 30_000, maxQueueSize: 2048, maxExportBatchSize: 512 },
  })
  const c = loadConfig({
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/otlp/v1/traces',
    OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=a%3Db, X-Team=core',
    OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-team=traces',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    OTEL_SERVICE_NAME: 'agents',
  })
  t.same(c.tracing, {
    url: 'https://traces.example/otlp/v1/traces',
    headers: { 'x-api-key': 'a=b', 'x-team': 'traces' },
    serviceName: 'agents',
    sampler: 'parentbased_always_on',
    samplerRatio: 1,
    batch: { scheduleDelayMs: 5000, exportTimeoutMs: 30_000, maxQueueSize: 2048, maxExportBatchSize: 512 },
  })
  t.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }).tracing, undefined)
  try {
    loadConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318',
      OTEL_EXPORTER_OTLP_HEADERS: 'novalue',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_SDK_DISABLED: 'yes',
    })
    t.fail('should throw')
  } catch (err) {
    t.type(err, ConfigError)
    t.same((err as ConfigError).problems.map((p) => p.split(' ')[0]).sort(), [
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      'OTEL_EXPORTER_OTLP_HEADERS',
      'OTEL_EXPORTER_OTLP_PROTOCOL',
      'OTEL_SDK_DISABLED',
    ])
  }
})

t.test('BURROW_MODEL_PRICES: provider:model=input/output per million tokens', async (t) => {
  t.equal(loadConfig({}).modelPrices.size, 0)
  const c = loadConfig({ BURROW_MODEL_PRICES: 'openai:gpt-4o-mini=0.15/0.6, anthropic:claude-sonnet-4-5=3/15' })
  t.same(
    [...c.modelPrices],
    [
      ['openai:gpt-4o-mini', { input: 0.15, output: 0.6 }],
      ['anthropic:claude-sonnet-4-5', { input: 3, output: 15 }],
    ],
  )
  for (const bad of ['gpt-4o=1/2', 'openai:gpt-4o=1', 'openai:gpt-4o=1/2/3', 'openai:gpt-4o=-1/2', 'openai:gpt-4o=a/b']) {
    try {
      loadConfig({ BURROW_MODEL_PRICES: bad })
      t.fail(`should refuse ${bad}`)
    } catch (err) {
      t.match((err as ConfigError).problems, [/^BURROW_MODEL_PRICES entry 1 must be provider:model=input\/output/], bad)
    }
  }
})

t.test('tracing: the sampler and batch variables', async (t) => {
  const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }
  t.match(
    loadConfig({
      ...on,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.1',
      OTEL_BSP_SCHEDULE_DELAY: '200',
      OTEL_BSP_EXPORT_TIMEOUT: '1000',
      OTEL_BSP_MAX_QUEUE_SIZE: '100',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '10',
    }).tracing,
    {
      sampler: 'parentbased_traceidratio',
      samplerRatio: 0.1,
      batch: { scheduleDelayMs: 200, exportTimeoutMs: 1000, maxQueueSize: 100, maxExportBatchSize: 10 },
    },
  )
  t.equal(loadConfig({ ...on, OTEL_TRACES_SAMPLER_ARG: '1' }).tracing?.samplerRatio, 1)
  t.equal(loadConfig({ ...on, OTEL_TRACES_SAMPLER_ARG: '0' }).tracing?.samplerRatio, 0)
  for (const [name, value] of [
    ['OTEL_TRACES_SAMPLER', 'jaeger_remote'],
    ['OTEL_TRACES_SAMPLER_ARG', '1.5'],
    ['OTEL_TRACES_SAMPLER_ARG', '-0.1'],
    ['OTEL_TRACES_SAMPLER_ARG', 'half'],
    ['OTEL_BSP_SCHEDULE_DELAY', '-1'],
    ['OTEL_BSP_MAX_QUEUE_SIZE', '0'],
    ['OTEL_BSP_MAX_EXPORT_BATCH_SIZE', '4096'],
  ] as const) {
    try {
      loadConfig({ ...on, [name]: value })
      t.fail(`${name}=${value} should be refused`)
    } catch (err) {
      t.type(err, ConfigError)
      t.match((err as ConfigError).problems.join('\n'), name, `${name}=${value} is named`)
    }
  }
})
