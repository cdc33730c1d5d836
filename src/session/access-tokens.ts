import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { BurrowError } from '../core/errors.js'
import type { TenantId } from '../core/ids.js'

/** What a token lets its bearer do: read, or read and write. An API key can do everything (`admin`). */
export type TokenScope = 'read' | 'write'
export type Scope = TokenScope | 'admin'

/** Who is calling, as the credential says: the tenant, the scope, and the one session a token may be limited to. */
export interface Principal {
  tenant: TenantId
  scope: Scope
  /** A token limited to one session: every other session, and every tenant-wide operation, is refused. */
  session: string | null
  /** A token's refresh limit (Unix seconds): a token it mints expires by then. Undefined for a key. */
  refreshUntil?: number
}

/** A minted token and what it allows. */
export interface MintedToken {
  token: string
  scope: TokenScope
  session: string | null
  /** Unix seconds. */
  expiresAt: number
  /** Unix seconds: tokens this one mints expire by then. */
  refreshUntil: number
}

/** The token's parts as signed. Short names keep the token short (it travels in URLs). */
interface Claims {
  /** The signing key's id. */
  k: string
  t: TenantId
  s: TokenScope
  /** Limited to this session (absent: the tenant). */
  i?: string
  /** Expiry, Unix seconds. */
  e: number
  /** Refresh limit, Unix seconds: tokens minted with this one expire by then. */
  r: number
}

const PREFIX = 'bt1.'
/** A token minted with an API key can be refreshed, token by token, for at most this long (12 h). */
export const REFRESH_WINDOW_S = 12 * 3600
export const DEFAULT_TTL_S = 900
export const MAX_TTL_S = 3600

interface SigningKey {
  id: string
  secret: Buffer
  tenant: TenantId
}

/**
 * Short-lived, scoped bearer tokens for browsers (`POST /v1/tokens`): `bt1.<claims>.<HMAC-SHA256>`,
 * base64url. Each token is signed with a secret derived from the API key that minted it (or, by
 * refresh, its ancestor), so every replica configured with the same `BURROW_API_KEYS` verifies it,
 * a restart does not invalidate it, and removing the key revokes all its tokens — with no secret
 * of its own to configure or share. The claims are readable by anyone holding the token; nothing
 * in them is secret (tenant name, scope, session id, times). With no keys configured (single-tenant),
 * tokens are signed with a random per-process secret: they still carry and enforce their scope.
 */
export class AccessTokens {
  private readonly byId = new Map<string, SigningKey>()
  private readonly byKey = new Map<string, SigningKey>()

  constructor(keys: ReadonlyMap<string, TenantId>, singleTenant: TenantId) {
    if (keys.size === 0) {
      const k = { id: 'local', secret: randomBytes(32), tenant: singleTenant }
      this.byId.set(k.id, k)
      this.byKey.set('', k)
    }
    for (const [key, tenant] of keys) {
      const k = { id: createHash('sha256').update(`burrow-key-id:${key}`).digest('base64url').slice(0, 16), secret: derive(key), tenant }
      this.byId.set(k.id, k)
      this.byKey.set(key, k)
    }
  }

  /** Whether a presented credential has the token form (else it is an API key). */
  static isToken(credential: string): boolean {
    return credential.startsWith(PREFIX)
  }

  /**
   * A token for `caller` (authenticated by `credential`: a key, or a token minted from one): never
   * wider than the caller — a read token mints read tokens, a session's token that session's —
   * and never past a token caller's refresh limit.
   */
  mint(
    caller: Principal,
    credential: string | undefined,
    req: { scope: TokenScope; session_id?: string | undefined; ttl_s?: number | undefined },
    now = nowS(),
  ): MintedToken {
    if (caller.scope === 'read' && req.scope === 'write') throw forbidden('A read-only token cannot mint a read-write token.')
    const session = req.session_id ?? caller.session
    if (caller.session !== null && session !== caller.session)
      throw forbidden(`This token is limited to session ${caller.session}; it can only mint tokens for that session.`)
    // A refreshed token is signed with the key its caller's was: revoking that key ends the whole chain.
    const signerId = credential && AccessTokens.isToken(credential) ? this.claimsOf(credential)?.k : undefined
    const signer = signerId !== undefined ? this.byId.get(signerId) : (this.byKey.get(credential ?? '') ?? this.byKey.get(''))
    if (!signer) throw new BurrowError('UNAUTHORIZED', 'Invalid API key.')
    const refreshUntil = caller.refreshUntil ?? now + REFRESH_WINDOW_S
    const expiresAt = Math.min(now + (req.ttl_s ?? DEFAULT_TTL_S), refreshUntil)
    if (expiresAt <= now) throw new BurrowError('UNAUTHORIZED', 'This token can no longer be refreshed: exchange an API key for a new one.')
    const claims: Claims = {
      k: signer.id,
      t: signer.tenant,
      s: req.scope,
      ...(session !== null ? { i: session } : {}),
      e: expiresAt,
      r: refreshUntil,
    }
    const body = PREFIX + Buffer.from(JSON.stringify(claims)).toString('base64url')
    return { token: `${body}.${sign(signer.secret, body)}`, scope: req.scope, session, expiresAt, refreshUntil }
  }

  /** The principal of a valid token; `UNAUTHORIZED` for a forged, unknown-key or expired one. */
  verify(token: string, now = nowS()): Principal {
    const dot = token.lastIndexOf('.')
    const body = token.slice(0, dot)
    const claims = dot > PREFIX.length ? this.claimsOf(token) : undefined
    const key = claims && this.byId.get(claims.k)
    const mac = Buffer.from(token.slice(dot + 1), 'base64url')
    const expected = key ? Buffer.from(sign(key.secret, body), 'base64url') : undefined
    if (!claims || !key || !expected || mac.length !== expected.length || !timingSafeEqual(mac, expected) || claims.t !== key.tenant)
      throw new BurrowError('UNAUTHORIZED', 'Invalid access token.')
    if (claims.e <= now) throw new BurrowError('UNAUTHORIZED', 'The access token has expired: mint a new one.', { reason: 'token_expired' })
    return { tenant: claims.t, scope: claims.s, session: claims.i ?? null, refreshUntil: claims.r }
  }

  /** The claims of a well-formed token (not verified), or undefined. */
  private claimsOf(token: string): Claims | undefined {
    const part = token.slice(PREFIX.length, token.lastIndexOf('.'))
    try {
      const c = JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Claims
      const ok =
        typeof c === 'object' &&
        c !== null &&
        typeof c.k === 'string' &&
        typeof c.t === 'string' &&
        (c.s === 'read' || c.s === 'write') &&
        (c.i === undefined || typeof c.i === 'string') &&
        Number.isSafeInteger(c.e) &&
        Number.isSafeInteger(c.r)
      return ok ? c : undefined
    } catch {
      return undefined
    }
  }
}

/** `FORBIDDEN`: the credential is valid, its scope does not allow the operation. */
export function forbidden(message: string): BurrowError {
  return new BurrowError('FORBIDDEN', message)
}

function derive(apiKey: string): Buffer {
  return createHmac('sha256', 'burrow-access-token-v1').update(apiKey, 'utf8').digest()
}

function sign(secret: Buffer, body: string): string {
  return createHmac('sha256', secret).update(body, 'utf8').digest('base64url')
}

function nowS(): number {
  return Math.floor(Date.now() / 1000)
}
