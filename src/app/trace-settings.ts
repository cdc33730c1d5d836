/** The tracing settings' names and defaults — the standard OpenTelemetry variables (config.ts reads them). */

/** Which new spans are recorded and exported: the standard `OTEL_TRACES_SAMPLER` names. */
export const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const

export type SamplerName = (typeof SAMPLERS)[number]

/** The batching of exports: the standard `OTEL_BSP_*` variables, with their defaults. */
export interface BatchSettings {
  /** Longest a span waits before its batch is sent (`OTEL_BSP_SCHEDULE_DELAY`, 5000). */
  scheduleDelayMs: number
  /** Spans kept while the collector is slow; more are dropped (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048). */
  maxQueueSize: number
  /** Spans per export (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, 512). */
  maxExportBatchSize: number
  /** One export's deadline (`OTEL_BSP_EXPORT_TIMEOUT`, 30000). */
  exportTimeoutMs: number
}

export const DEFAULT_BATCH: BatchSettings = { scheduleDelayMs: 5000, maxQueueSize: 2048, maxExportBatchSize: 512, exportTimeoutMs: 30_000 }
