import { hostname } from 'node:os'
import type { EffectiveCompaction } from '../core/session-record.js'
import type { ProviderHttpOptions } from '../providers/provider-http.js'
import { StartupError } from './startup-error.js'
import { DEFAULT_BATCH, SAMPLERS, type BatchSettings, type SamplerName } from './trace-settings.js'

/** Every setting of the service, checked at start-up (docs/configuration.md). */
export interface Config {
  host: string
  port: number
  dataDir: string
  sessionStore: 'lmdb' | 'postgres' | 'off'
  /**
   * Whether this process may write the human-readable projection (`sessions/<id>/` under the data
   * directory). On by default with LMDB; off by default with PostgreSQL, where, when on, one replica
   * at a time writes it (elected by a lease). Always false without a session store.
   */
  projection: boolean
  /** PostgreSQL for `sessionStore: 'postgres'` and `memoryStore: 'postgres'` (a `postgres://` URL; required with either). */
  databaseUrl: string | undefined
  /** This replica's name in leases and logs (default: host name and process id). */
  replicaId: string
  /** How long a session lease lasts without renewal (ms). */
  leaseMs: number
  /** How long a session lease is kept after its work, for the session's next (ms; 0: released at once). */
  leaseLingerMs: number
  /** Connections in the PostgreSQL pool. */
  pgPoolSize: number
  memoryStore: 'hnsw' | 'postgres' | 'off'
  compaction: boolean
  defaultModel: string | undefined
  anthropic: { apiKey: string | undefined; baseUrl: string }
  openai: { apiKey: string | undefined; baseUrl: string; configured: boolean }
  embeddings: { url: string | undefined; model: string | undefined; apiKey: string | undefined }
  /**
   * Which embedder memory uses: `BURROW_EMBEDDER` (`hashed` or `use-lite`), or `endpoint` when
   * `BURROW_EMBEDDINGS_URL` is set — the URL overrides `BURROW_EMBEDDER`.
   */
  embedder: 'hashed' | 'use-lite' | 'endpoint'
  /** Set when `BURROW_EMBEDDER` was given but the URL overrode it (logged at start-up). */
  embedderOverridden: string | undefined
  apiKeys: Map<string, string>
  durability: 'fsync' | 'relaxed'
  corsOrigins: string[] | undefined
  logLevel: string
  bodyLimitBytes: number
  /** The providers' HTTP client settings (timeouts, retries). */
  provider: ProviderHttpOptions
  maxTurnSteps: number
  defaultMaxTokens: number
  eventBuffer: number
  sseHeartbeatMs: number
  sseQueueLimit: number
  maxLiveSessions: number
  shutdownGraceMs: number
  rateLimitPerMinute: number | undefined
  compactionDefaults: EffectiveCompaction
  /**
   * Start anyway when the session store is missing or holds no sessions although the data
   * directory holds projected sessions (`sessions/`): normally that means the wrong
   * directory or a lost store file, and starting fresh would hide every session.
   */
  allowEmptyStore: boolean
  /** Free bytes the data directory's file system must have at start-up (0: no check). */
  minFreeBytes: number
  /** OpenTelemetry traces over OTLP/HTTP; undefined (tracing off, no SDK loaded) without an OTLP endpoint. */
  tracing: TracingConfig | undefined
  /** USD per million tokens, by `provider:model`, for `burrow_llm_cost_usd_total` (`BURROW_MODEL_PRICES`). */
  modelPrices: Map<string, { input: number; output: number }>
}

export interface TracingConfig {
  /** Where spans are POSTed: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as is, or `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`. */
  url: string
  /** `OTEL_EXPORTER_OTLP_HEADERS` then `OTEL_EXPORTER_OTLP_TRACES_HEADERS` (`key=value,…`, values URL-encoded). */
  headers: Record<string, string>
  /** `service.name` of the spans (`OTEL_SERVICE_NAME`, default `burrow`). */
  serviceName: string
  /** `OTEL_TRACES_SAMPLER` (default `parentbased_always_on`) and its ratio (`OTEL_TRACES_SAMPLER_ARG`, default 1) for the ratio samplers. */
  sampler: SamplerName
  samplerRatio: number
  /** `OTEL_BSP_*`: batching of exports. */
  batch: BatchSettings
}

export class ConfigError extends StartupError {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`)
    this.name = 'ConfigError'
  }
}

type Env = Record<string, string | undefined>

/**
 * The embedder when `BURROW_EMBEDDER` is unset, chosen from the recall benchmark's numbers
 * (docs/guarantees.md, Memory; docs/benchmarks.md, memory-recall).
 */
export const DEFAULT_EMBEDDER: 'hashed' | 'use-lite' = 'hashed'

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']

/** Reads and checks the environment; throws one `ConfigError` listing every bad variable. */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = []
  const r = new Reader(env, problems)
  const openaiKey = r.str('OPENAI_API_KEY')
  const openaiBase = r.str('OPENAI_BASE_URL')
  const sessionStore = r.oneOf('BURROW_SESSION_STORE', ['lmdb', 'postgres', 'off'], 'lmdb')
  // Many replicas would each write every session into their own directory: with PostgreSQL the files are asked for.
  const projection = r.oneOf('BURROW_PROJECTION', ['on', 'off'], sessionStore === 'lmdb' ? 'on' : 'off') === 'on'
  const config: Config = {
    host: r.str('HOST') ?? '127.0.0.1',
    port: r.int('PORT', 8080, 0, 65535),
    dataDir: r.str('BURROW_DATA_DIR') ?? './data',
    sessionStore,
    projection,
    databaseUrl: r.pgUrl('BURROW_DATABASE_URL'),
    replicaId: r.str('BURROW_REPLICA_ID') ?? `${hostname()}-${process.pid}`,
    leaseMs: r.int('BURROW_LEASE_MS', 10_000, 1_000, 600_000),
    leaseLingerMs: r.int('BURROW_LEASE_LINGER_MS', 2_000, 0, 60_000),
    pgPoolSize: r.int('BURROW_PG_POOL_SIZE', 10, 1, 1_000),
    memoryStore: r.oneOf('BURROW_MEMORY_STORE', ['hnsw', 'postgres', 'off'], 'hnsw'),
    compaction: r.oneOf('BURROW_COMPACTION', ['on', 'off'], 'on') === 'on',
    defaultModel: r.str('BURROW_DEFAULT_MODEL'),
    anthropic: { apiKey: r.str('ANTHROPIC_API_KEY'), baseUrl: r.url('ANTHROPIC_BASE_URL') ?? 'https://api.anthropic.com' },
    openai: {
      apiKey: openaiKey,
      baseUrl: r.url('OPENAI_BASE_URL') ?? 'https://api.openai.com/v1',
      configured: Boolean(openaiKey || openaiBase),
    },
    embeddings: {
      url: r.url('BURROW_EMBEDDINGS_URL'),
      model: r.str('BURROW_EMBEDDINGS_MODEL'),
      apiKey: r.str('BURROW_EMBEDDINGS_API_KEY'),
    },
    embedder: r.oneOf('BURROW_EMBEDDER', ['hashed', 'use-lite'], DEFAULT_EMBEDDER),
    embedderOverridden: undefined,
    apiKeys: r.apiKeys('BURROW_API_KEYS'),
    durability: r.oneOf('BURROW_DURABILITY', ['fsync', 'relaxed'], 'fsync'),
    corsOrigins: r.list('BURROW_CORS_ORIGINS'),
    logLevel: r.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
    bodyLimitBytes: r.int('BURROW_BODY_LIMIT_BYTES', 10 * 1024 * 1024, 1024, 1024 ** 3),
    provider: {
      headersTimeoutMs: r.int('BURROW_PROVIDER_TIMEOUT_MS', 120_000, 1, 3_600_000),
      idleTimeoutMs: r.int('BURROW_PROVIDER_IDLE_TIMEOUT_MS', 60_000, 1, 3_600_000),
      connectTimeoutMs: r.int('BURROW_PROVIDER_CONNECT_TIMEOUT_MS', 10_000, 1, 600_000),
      maxRetries: r.int('BURROW_PROVIDER_MAX_RETRIES', 2, 0, 10),
      retryBaseMs: r.int('BURROW_PROVIDER_RETRY_BASE_MS', 500, 0, 60_000),
      retryMaxMs: r.int('BURROW_PROVIDER_RETRY_MAX_MS', 8_000, 0, 300_000),
    },
    maxTurnSteps: r.int('BURROW_MAX_TURN_STEPS', 32, 1, 1000),
    defaultMaxTokens: r.int('BURROW_DEFAULT_MAX_TOKENS', 4096, 1, 200_000),
    eventBuffer: r.int('BURROW_EVENT_BUFFER', 256, 0, 1_000_000),
    sseHeartbeatMs: r.int('BURROW_SSE_HEARTBEAT_MS', 15_000, 10, 3_600_000),
    sseQueueLimit: r.int('BURROW_SSE_QUEUE_LIMIT', 1024, 1, 1_000_000),
    maxLiveSessions: r.int('BURROW_MAX_LIVE_SESSIONS', 10_000, 1, 10_000_000),
    shutdownGraceMs: r.int('BURROW_SHUTDOWN_GRACE_MS', 10_000, 0, 3_600_000),
    rateLimitPerMinute: r.optInt('BURROW_RATE_LIMIT_PER_MINUTE', 1, 10_000_000),
    compactionDefaults: {
      auto_compact_threshold: r.int('BURROW_COMPACT_THRESHOLD', 100_000, 1, 10_000_000),
      recent_turn_budget: r.int('BURROW_COMPACT_RECENT_TURNS', 4, 0, 1000),
      max_summary_tokens: r.int('BURROW_COMPACT_MAX_SUMMARY_TOKENS', 4096, 1, 200_000),
      min_turns_between_compactions: r.int('BURROW_COMPACT_MIN_TURNS', 3, 0, 1000),
      max_history_messages: r.optInt('BURROW_COMPACT_MAX_HISTORY_MESSAGES', 2, 10_000_000) ?? null,
    },
    allowEmptyStore: r.oneOf('BURROW_ALLOW_EMPTY_STORE', ['true', 'false'], 'false') === 'true',
    minFreeBytes: r.int('BURROW_MIN_FREE_BYTES', 64 * 1024 * 1024, 0, Number.MAX_SAFE_INTEGER),
    tracing: tracingConfig(r),
    modelPrices: r.prices('BURROW_MODEL_PRICES'),
  }
  if (config.embeddings.url && !config.embeddings.model)
    problems.push('BURROW_EMBEDDINGS_MODEL must name the model when BURROW_EMBEDDINGS_URL is set')
  if (config.embeddings.url) {
    if (r.str('BURROW_EMBEDDER') !== undefined) config.embedderOverridden = config.embedder
    config.embedder = 'endpoint'
  }
  if (config.sessionStore === 'postgres' && !config.databaseUrl && r.str('BURROW_DATABASE_URL') === undefined)
    problems.push('BURROW_DATABASE_URL must be set to a postgres:// URL when BURROW_SESSION_STORE=postgres')
  if (config.memoryStore === 'postgres' && !config.databaseUrl && r.str('BURROW_DATABASE_URL') === undefined)
    problems.push('BURROW_DATABASE_URL must be set to a postgres:// URL when BURROW_MEMORY_STORE=postgres')
  if (sessionStore === 'off' && r.str('BURROW_PROJECTION') === 'on')
    problems.push('BURROW_PROJECTION=on needs a session store (BURROW_SESSION_STORE=lmdb or postgres): the projection is written from it')
  if (config.defaultModel !== undefined && !/^[a-zA-Z0-9_.-]+:.+$/.test(config.defaultModel)) {
    problems.push(`BURROW_DEFAULT_MODEL must look like 'provider:model' (got '${config.defaultModel}')`)
  }
  if (problems.length > 0) throw new ConfigError(problems)
  return config
}

/** The standard OpenTelemetry variables Burrow reads (docs/observability.md); off without an endpoint or with `OTEL_SDK_DISABLED=true`. */
function tracingConfig(r: Reader): TracingConfig | undefined {
  const traces = r.url('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')
  const base = r.url('OTEL_EXPORTER_OTLP_ENDPOINT')
  // Spans always go as OTLP/HTTP JSON, which the Collector's OTLP/HTTP receiver takes on the same path as
  // protobuf: a deployment's `http/protobuf` setting is accepted; gRPC is refused (a different port and transport).
  r.oneOf('OTEL_EXPORTER_OTLP_PROTOCOL', ['http/json', 'http/protobuf'], 'http/json')
  r.oneOf('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', ['http/json', 'http/protobuf'], 'http/json')
  const headers = { ...r.otlpHeaders('OTEL_EXPORTER_OTLP_HEADERS'), ...r.otlpHeaders('OTEL_EXPORTER_OTLP_TRACES_HEADERS') }
  const serviceName = r.str('OTEL_SERVICE_NAME') ?? 'burrow'
  const sampler = r.oneOf('OTEL_TRACES_SAMPLER', SAMPLERS, 'parentbased_always_on')
  const samplerRatio = r.ratio('OTEL_TRACES_SAMPLER_ARG', 1)
  const batch: BatchSettings = {
    scheduleDelayMs: r.int('OTEL_BSP_SCHEDULE_DELAY', DEFAULT_BATCH.scheduleDelayMs, 0, 3_600_000),
    exportTimeoutMs: r.int('OTEL_BSP_EXPORT_TIMEOUT', DEFAULT_BATCH.exportTimeoutMs, 1, 3_600_000),
    maxQueueSize: r.int('OTEL_BSP_MAX_QUEUE_SIZE', DEFAULT_BATCH.maxQueueSize, 1, 1_000_000),
    maxExportBatchSize: r.int('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', DEFAULT_BATCH.maxExportBatchSize, 1, 1_000_000),
  }
  if (batch.maxExportBatchSize > batch.maxQueueSize) r.problem('OTEL_BSP_MAX_EXPORT_BATCH_SIZE must not exceed OTEL_BSP_MAX_QUEUE_SIZE')
  if (r.oneOf('OTEL_SDK_DISABLED', ['true', 'false'], 'false') === 'true') return undefined
  const url = traces ?? (base ? `${base}/v1/traces` : undefined)
  return url ? { url, headers, serviceName, sampler, samplerRatio, batch } : undefined
}

class Reader {
  constructor(
    private readonly env: Env,
    private readonly problems: string[],
  ) {}

  str(name: string): string | undefined {
    const v = this.env[name]
    return v === undefined || v.trim() === '' ? undefined : v.trim()
  }

  int(name: string, def: number, min: number, max: number): number {
    return this.optInt(name, min, max) ?? def
  }

  optInt(name: string, min: number, max: number): number | undefined {
    const v = this.str(name)
    if (v === undefined) return undefined
    const n = Number(v)
    if (!/^-?\d+$/.test(v) || !Number.isSafeInteger(n) || n < min || n > max) {
      this.problems.push(`${name} must be an integer from ${min} to ${max} (got '${v}')`)
      return undefined
    }
    return n
  }

  problem(message: string): void {
    this.problems.push(message)
  }

  /** A number from 0 to 1. */
  ratio(name: string, def: number): number {
    const v = this.str(name)
    if (v === undefined) return def
    const n = Number(v)
    if (!/^\d*\.?\d+(?:e-?\d+)?$/i.test(v) || !(n >= 0 && n <= 1)) {
      this.problems.push(`${name} must be a number from 0 to 1 (got '${v}')`)
      return def
    }
    return n
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], def: T): T {
    const v = this.str(name)
    if (v === undefined) return def
    if (!(allowed as readonly string[]).includes(v)) {
      this.problems.push(`${name} must be one of ${allowed.join(', ')} (got '${v}')`)
      return def
    }
    return v as T
  }

  url(name: string): string | undefined {
    const v = this.str(name)
    if (v === undefined) return undefined
    try {
      const u = new URL(v)
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('protocol')
      return v.replace(/\/+$/, '')
    } catch {
      this.problems.push(`${name} must be an http(s) URL (got '${v}')`)
      return undefined
    }
  }

  /** A PostgreSQL connection URL (`postgres://` or `postgresql://`); never echoed with its password. */
  pgUrl(name: string): string | undefined {
    const v = this.str(name)
    if (v === undefined) return undefined
    try {
      const u = new URL(v)
      if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') throw new Error('protocol')
      if (!u.hostname) throw new Error('host')
      return v
    } catch {
      this.problems.push(`${name} must be a postgres:// URL (postgres://user:password@host:port/database)`)
      return undefined
    }
  }

  list(name: string): string[] | undefined {
    const v = this.str(name)
    if (v === undefined) return undefined
    return v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
  }

  /** `key=value` pairs separated by commas, values URL-encoded (the OTLP exporter's header format). */
  otlpHeaders(name: string): Record<string, string> {
    const out: Record<string, string> = {}
    for (const [i, pair] of (this.list(name) ?? []).entries()) {
      const at = pair.indexOf('=')
      const key = pair.slice(0, at).trim().toLowerCase()
      let value: string
      try {
        value = decodeURIComponent(pair.slice(at + 1).trim())
      } catch {
        value = ''
      }
      if (at <= 0 || !/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(key) || value === '') {
        this.problems.push(`${name} entry ${i + 1} must be key=value (value URL-encoded)`)
        continue
      }
      out[key] = value
    }
    return out
  }

  /** `provider:model=input/output,…`: USD per million input and output tokens. */
  prices(name: string): Map<string, { input: number; output: number }> {
    const out = new Map<string, { input: number; output: number }>()
    const price = (v: string | undefined) => (v !== undefined && /^\d+(\.\d+)?$/.test(v.trim()) ? Number(v) : NaN)
    for (const [i, entry] of (this.list(name) ?? []).entries()) {
      const at = entry.lastIndexOf('=')
      const model = entry.slice(0, at).trim()
      const [input, output, extra] = entry.slice(at + 1).split('/')
      const p = { input: price(input), output: price(output) }
      if (
        at <= 0 ||
        !/^[a-zA-Z0-9_.-]+:.+$/.test(model) ||
        extra !== undefined ||
        !Number.isFinite(p.input) ||
        !Number.isFinite(p.output)
      ) {
        this.problems.push(`${name} entry ${i + 1} must be provider:model=input/output in USD per million tokens (got '${entry}')`)
        continue
      }
      out.set(model, p)
    }
    return out
  }

  apiKeys(name: string): Map<string, string> {
    const out = new Map<string, string>()
    for (const [i, pair] of (this.list(name) ?? []).entries()) {
      const at = pair.lastIndexOf(':')
      const key = pair.slice(0, at)
      const tenant = pair.slice(at + 1)
      if (at <= 0 || !tenant || !/^[a-zA-Z0-9_.-]{1,128}$/.test(tenant)) {
        this.problems.push(`${name} entry ${i + 1} must be key:tenant with a tenant of letters, digits, '_', '.', '-'`)
        continue
      }
      if (out.has(key)) {
        this.problems.push(`${name} lists one key twice (entry ${i + 1})`)
        continue
      }
      out.set(key, tenant)
    }
    return out
  }
}
