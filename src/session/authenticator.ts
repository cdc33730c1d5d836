import { createHash, timingSafeEqual } from 'node:crypto'
import { BurrowError } from '../core/errors.js'
import { DEFAULT_TENANT, type TenantId } from '../core/ids.js'
import { AccessTokens, forbidden, type MintedToken, type Principal, type TokenScope } from './access-tokens.js'

/** What an operation needs: to read or to write, one session's data or the tenant's (`null`). */
export interface Access {
  write: boolean
  session: string | null
}

/**
 * Resolves a presented credential — an API key, or a short-lived token minted from one
 * (access-tokens.ts) — to its principal. With no keys configured the service is single-tenant
 * and every caller is the `default` tenant with full access, except that a valid token presented
 * keeps its scope.
 */
export class Authenticator {
  private readonly keys: Array<{ digest: Buffer; tenant: TenantId }>
  readonly tokens: AccessTokens

  constructor(keys: ReadonlyMap<string, TenantId>) {
    this.keys = [...keys].map(([k, tenant]) => ({ digest: digest(k), tenant }))
    this.tokens = new AccessTokens(keys, DEFAULT_TENANT)
  }

  get enabled(): boolean {
    return this.keys.length > 0
  }

  /** Throws `UNAUTHORIZED` for a missing or unknown key, or a bad or expired token, when auth is on. */
  tenantFor(credential: string | undefined): TenantId {
    return this.principal(credential).tenant
  }

  /** The caller, as its credential says (`UNAUTHORIZED` as {@link tenantFor}). */
  principal(credential: string | undefined): Principal {
    if (!this.enabled) {
      if (credential && AccessTokens.isToken(credential)) {
        try {
          return this.tokens.verify(credential)
        } catch {
          // No auth: a token that does not verify (minted before a restart) is no credential at all.
        }
      }
      return { tenant: DEFAULT_TENANT, scope: 'admin', session: null }
    }
    if (!credential) throw new BurrowError('UNAUTHORIZED', 'Missing API key: send Authorization: Bearer <key>.')
    if (AccessTokens.isToken(credential)) return this.tokens.verify(credential)
    const d = digest(credential)
    // Compare against every key in constant time so timing does not reveal which prefix matched.
    let found: TenantId | undefined
    for (const k of this.keys) if (timingSafeEqual(k.digest, d)) found = k.tenant
    if (found === undefined) throw new BurrowError('UNAUTHORIZED', 'Invalid API key.')
    return { tenant: found, scope: 'admin', session: null }
  }

  /** The caller's tenant when its credential allows `access`; `FORBIDDEN` when valid but too narrow. */
  authorize(credential: string | undefined, access: Access): TenantId {
    const p = this.principal(credential)
    if (access.write && p.scope === 'read') throw forbidden('This token is read-only.')
    if (p.session !== null && access.session !== p.session)
      throw forbidden(
        access.session === null
          ? `This token is limited to session ${p.session}: tenant-wide operations need a key or a token without a session.`
          : `This token is limited to session ${p.session}.`,
      )
    return p.tenant
  }

  /** A token no wider than the caller (see AccessTokens.mint). */
  mint(
    credential: string | undefined,
    req: { scope: TokenScope; session_id?: string | undefined; ttl_s?: number | undefined },
  ): MintedToken {
    return this.tokens.mint(this.principal(credential), credential, req)
  }
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest()
}
