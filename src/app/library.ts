/**
 * Burrow as a library (`import { createBurrow, loadConfig } from 'burrow/server'`): the
 * service and its HTTP server in your process, configured like the server.
 */
export { createBurrow, type Burrow } from './burrow.js'
export { loadConfig, type Config } from './config.js'
export { StartupError } from './startup-error.js'
export type { SessionService, SessionOperations, CallContext } from '../core/session-service.js'
