/** Session ids are UUIDv7 (time-ordered), lower-case canonical form. */
export type SessionId = string

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

export function isSessionId(value: unknown): value is SessionId {
  return typeof value === 'string' && UUID_RE.test(value)
}

/** A tenant name as configured in `BURROW_API_KEYS`; `default` in single-tenant mode. */
export type TenantId = string

export const DEFAULT_TENANT: TenantId = 'default'
