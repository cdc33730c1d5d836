/**
 * The service's idempotency keys: `tenant \0 scope \0 caller's key`, the scope a session's id (`-`
 * for calls outside a session), so clients cannot collide across tenants or sessions. Made here
 * and taken apart here, by the service and by every store that keeps the parts apart.
 */
export function idempotencyKey(tenant: string, sessionId: string | null, key: string): string {
  return `${tenant}\u0000${sessionId ?? '-'}\u0000${key}`
}

/** The tenant, the scope and the caller's key of a key {@link idempotencyKey} made (the caller's key may hold NULs itself). */
export function idempotencyKeyParts(key: string): [tenant: string, scope: string, caller: string] {
  const a = key.indexOf('\u0000')
  const b = a < 0 ? -1 : key.indexOf('\u0000', a + 1)
  if (b < 0) throw new Error('an idempotency key is tenant \\0 session \\0 key')
  return [key.slice(0, a), key.slice(a + 1, b), key.slice(b + 1)]
}
