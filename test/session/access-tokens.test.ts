// The token codec on its own: what a token says, what it refuses, and how long a chain of refreshes may last.
import t from 'tap'
import { AccessTokens, DEFAULT_TTL_S, REFRESH_WINDOW_S, type Principal } from '../../src/session/access-tokens.js'
import { BurrowError } from '../../src/core/errors.js'

const KEYS = new Map([
  ['key-a', 'tenantA'],
  ['key-b', 'tenantB'],
])
const admin = (tenant: string): Principal => ({ tenant, scope: 'admin', session: null })
const NOW = 1_800_000_000
const SID = '01930000-0000-7000-8000-000000000001'

function code(fn: () => unknown): string | undefined {
  try {
    fn()
  } catch (err) {
    return err instanceof BurrowError ? err.code : `not a BurrowError: ${String(err)}`
  }
  return undefined
}

t.test('a key mints a token that verifies with its tenant, scope, session and times', async (t) => {
  const tokens = new AccessTokens(KEYS, 'default')
  const m = tokens.mint(admin('tenantA'), 'key-a', { scope: 'read', session_id: SID }, NOW)
  t.ok(AccessTokens.isToken(m.token))
  t.notOk(m.token.includes('key-a'), 'the key is not in the token')
  t.equal(m.expiresAt, NOW + DEFAULT_TTL_S)
  t.equal(m.refreshUntil, NOW + REFRESH_WINDOW_S)
  t.same(tokens.verify(m.token, NOW + 1), { tenant: 'tenantA', scope: 'read', session: SID, refreshUntil: NOW + REFRESH_WINDOW_S })
  t.equal(
    code(() => tokens.verify(m.token, m.expiresAt)),
    'UNAUTHORIZED',
    'expired at its expiry',
  )
})

t.test('another process with the same keys verifies it; without the key, nobody does', async (t) => {
  const m = new AccessTokens(KEYS, 'default').mint(admin('tenantB'), 'key-b', { scope: 'write', ttl_s: 60 }, NOW)
  t.equal(new AccessTokens(KEYS, 'default').verify(m.token, NOW).tenant, 'tenantB', 'a restart or another replica')
  t.equal(
    code(() => new AccessTokens(new Map([['key-a', 'tenantA']]), 'default').verify(m.token, NOW)),
    'UNAUTHORIZED',
    'key removed: revoked',
  )
  t.equal(
    code(() => new AccessTokens(new Map([['key-b', 'tenantX']]), 'default').verify(m.token, NOW)),
    'UNAUTHORIZED',
    'key moved to another tenant',
  )
})

t.test('forged and malformed tokens are UNAUTHORIZED', async (t) => {
  const tokens = new AccessTokens(KEYS, 'default')
  const m = tokens.mint(admin('tenantA'), 'key-a', { scope: 'read' }, NOW)
  const [prefix, body, mac] = m.token.split('.') as [string, string, string]
  const claims = JSON.parse(Buffer.from(body, 'base64url').toString())
  const widened = Buffer.from(JSON.stringify({ ...claims, s: 'write' })).toString('base64url')
  const other = Buffer.from(JSON.stringify({ ...claims, t: 'tenantB' })).toString('base64url')
  for (const bad of [
    `${prefix}.${widened}.${mac}`,
    `${prefix}.${other}.${mac}`,
    `${prefix}.${body}.${mac.slice(0, -2)}`,
    `${prefix}.${body}.`,
    `${prefix}.${body}`,
    `${prefix}.not-json.${mac}`,
    'bt1.',
    'bt1..',
  ])
    t.equal(
      code(() => tokens.verify(bad, NOW)),
      'UNAUTHORIZED',
      bad.slice(0, 40),
    )
})

t.test('a token mints no wider than itself, and a chain of refreshes ends', async (t) => {
  const tokens = new AccessTokens(KEYS, 'default')
  const read = tokens.mint(admin('tenantA'), 'key-a', { scope: 'read' }, NOW)
  const readP = tokens.verify(read.token, NOW)
  t.equal(
    code(() => tokens.mint(readP, read.token, { scope: 'write' }, NOW)),
    'FORBIDDEN',
    'read cannot mint write',
  )
  const scoped = tokens.mint(admin('tenantA'), 'key-a', { scope: 'write', session_id: SID }, NOW)
  const scopedP = tokens.verify(scoped.token, NOW)
  t.equal(
    code(() => tokens.mint(scopedP, scoped.token, { scope: 'read', session_id: '01930000-0000-7000-8000-000000000002' }, NOW)),
    'FORBIDDEN',
  )
  t.equal(tokens.mint(scopedP, scoped.token, { scope: 'read' }, NOW).session, SID, 'a session token mints for its session')

  // Refresh every 10 minutes: the chain keeps its first refresh limit, and the last token expires by it.
  let current = read
  let at = NOW
  for (;;) {
    at += 600
    const p = tokens.verify(current.token, at)
    t.equal(p.refreshUntil, NOW + REFRESH_WINDOW_S)
    if (at + DEFAULT_TTL_S > NOW + REFRESH_WINDOW_S) {
      const last = tokens.mint(p, current.token, { scope: 'read' }, at)
      t.equal(last.expiresAt, NOW + REFRESH_WINDOW_S, 'the last refresh is cut at the limit')
      t.equal(
        code(() => tokens.verify(last.token, NOW + REFRESH_WINDOW_S)),
        'UNAUTHORIZED',
      )
      break
    }
    current = tokens.mint(p, current.token, { scope: 'read' }, at)
  }
})

t.test('single-tenant: a per-process secret signs tokens of the default tenant', async (t) => {
  const tokens = new AccessTokens(new Map(), 'default')
  const m = tokens.mint(admin('default'), undefined, { scope: 'read' }, NOW)
  t.same(tokens.verify(m.token, NOW), { tenant: 'default', scope: 'read', session: null, refreshUntil: NOW + REFRESH_WINDOW_S })
  t.equal(
    code(() => new AccessTokens(new Map(), 'default').verify(m.token, NOW)),
    'UNAUTHORIZED',
    'another process does not know it',
  )
})
