import { loadConfig } from './config.js'
import { createBurrow } from './burrow.js'
import { createLogger } from './logger.js'

/**
 * The OpenAPI document generated from the route schemas. Routes do not depend on
 * configuration, so a fixed, capability-free configuration gives a stable document.
 */
export async function generateOpenApi(): Promise<string> {
  const config = loadConfig({ BURROW_SESSION_STORE: 'off', BURROW_MEMORY_STORE: 'off', BURROW_COMPACTION: 'off', LOG_LEVEL: 'silent' })
  const burrow = await createBurrow(config, { logger: createLogger('silent'), defaultMetrics: false })
  try {
    await burrow.app.ready()
    return `${JSON.stringify(burrow.app.swagger(), null, 2)}\n`
  } finally {
    await burrow.close()
  }
}
