import { createHash, timingSafeEqual } from 'node:crypto'
import { BurrowError } from '../core/errors.js'
import { DEFAULT_TENANT, type TenantId } from '../core/ids.js'

/**
 * Resolves a presented API key to its tenant. With no keys configured the service
 * is single-tenant and every caller is the `default` tenant.
 */
export class Authenticator {
  private readonly keys: Array<{ digest: Buffer; tenant: TenantId }>

  constructor(keys: ReadonlyMap<string, TenantId>) {
    this.keys = [...keys].map(([k, tenant]) => ({ digest: digest(k), tenant }))
  }

  get enabled(): boolean {
    return this.keys.length > 0
  }

  /** Throws `UNAUTHORIZED` for a missing or unknown key when auth is on. */
  tenantFor(apiKey: string | undefined): TenantId {
    if (!this.enabled) return DEFAULT_TENANT
    if (!apiKey) throw new BurrowError('UNAUTHORIZED', 'Missing API key: send Authorization: Bearer <key>.')
    const d = digest(apiKey)
    // Compare against every key in constant time so timing does not reveal which prefix matched.
    let found: TenantId | undefined
    for (const k of this.keys) if (timingSafeEqual(k.digest, d)) found = k.tenant
    if (found === undefined) throw new BurrowError('UNAUTHORIZED', 'Invalid API key.')
    return found
  }
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest()
}
