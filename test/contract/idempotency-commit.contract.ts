// The idempotency chapter every SessionRepository must pass (in-memory, LMDB, PostgreSQL, and the
// null repository of ephemeral mode): an outcome handed to `commit` is written in the same
// transaction as the events — a commit the store refuses writes neither, and what a crash leaves
// (the next process to open the store, the first one never closed) holds both. The crash itself,
// a kill -9 between the work's commit and the answer under load, is test/app/idempotency-crash.test.ts.
import type { Test } from 'tap'
import type { IdempotencyWrite, SessionRepository } from '../../src/core/stores.js'
import { idempotencyKey } from '../../src/session/idempotency.js'
import { SessionLog, sessionId } from './fixtures.js'

export interface CommitHandle {
  repo: SessionRepository
  /** The store as the next process finds it when this one dies without closing it (stores that outlive the process). */
  crashed?: () => Promise<SessionRepository>
  /** Another process sharing the store, with claims of its own (stores with claims). */
  peer?: () => Promise<SessionRepository>
  /** The repository keeps no log to check commits against (ephemeral mode): it refuses none. */
  keepsNoLog?: boolean
  /** How long a claim holds unless renewed (stores with claims). */
  claimMs?: number
  cleanup: () => Promise<void>
}

const outcome = (sid: string, key: string, value: unknown): IdempotencyWrite => ({
  key: idempotencyKey('tenant-a', sid, key),
  record: { fingerprint: `fp-${key}`, created_at: Date.now(), outcome: { ok: true, value } },
})

export function idempotencyCommitContract(t: Test, factory: () => Promise<CommitHandle>): void {
  t.test('an outcome committed with events is found with them', async (t) => {
    const h = await factory()
    t.teardown(h.cleanup)
    const log = new SessionLog(sessionId(1))
    const created = log.create()
    const w1 = outcome(log.id, 'create', { session_id: log.id })
    await h.repo.commit(created.events, created.record, 0, [w1])
    const turn = log.turn('hi')
    const w2 = outcome(log.id, 'turn', { turn: 1, output_text: 'echo: hi \u0000 😀' })
    await h.repo.commit(turn.events, turn.record, 0, [w2])
    t.same(await h.repo.idempotency.get(w1.key), w1.record)
    t.same(await h.repo.idempotency.get(w2.key), w2.record)
    if (!h.crashed) return
    const next = await h.crashed()
    t.same(await next.idempotency.get(w2.key), w2.record, 'found after a crash')
    t.equal((await next.sessions.get(log.id))?.last_seq, turn.record.last_seq, 'with the work')
  })

  t.test('a commit the store refuses writes no outcome', async (t) => {
    const h = await factory()
    t.teardown(h.cleanup)
    const log = new SessionLog(sessionId(2))
    const created = log.create()
    await h.repo.commit(created.events, created.record, 0)
    log.turn('skipped') // never committed: the next commit does not follow the stored log
    const gap = log.turn('after a gap')
    const w = outcome(log.id, 'gap', { turn: 2 })
    const refused = await Promise.resolve(h.repo.commit(gap.events, gap.record, 0, [w])).then(
      () => false,
      () => true,
    )
    if (h.keepsNoLog) return t.notOk(refused, 'this repository keeps nothing to refuse (ephemeral)')
    t.ok(refused, 'the commit is refused')
    t.equal(await h.repo.idempotency.get(w.key), undefined, 'no outcome without its work')
    if (!h.crashed) return
    const next = await h.crashed()
    t.equal(await next.idempotency.get(w.key), undefined, 'nor after a crash')
    t.equal((await next.sessions.get(log.id))?.last_seq, 1)
  })

  t.test('a claimed key whose outcome is committed with the work is done for every process', async (t) => {
    const h = await factory()
    t.teardown(h.cleanup)
    const claim = h.repo.idempotency.claim
    if (!claim || !h.peer) return t.pass('this repository is not shared by processes')
    const log = new SessionLog(sessionId(3))
    const w = outcome(log.id, 'claimed', { session_id: log.id })
    t.match(await claim.call(h.repo.idempotency, w.key, w.record.fingerprint), { kind: 'claimed' })
    const peer = await h.peer()
    t.same(await peer.idempotency.claim!(w.key, w.record.fingerprint), { kind: 'running', fingerprint: w.record.fingerprint })
    const created = log.create()
    await h.repo.commit(created.events, created.record, 0, [w])
    h.repo.idempotency.completed?.(w.key)
    t.same(await peer.idempotency.claim!(w.key, w.record.fingerprint), { kind: 'done', record: w.record })
  })

  t.test('a new session committed under a claim another process took over is not stored', async (t) => {
    const h = await factory()
    t.teardown(h.cleanup)
    const claim = h.repo.idempotency.claim
    if (!claim || !h.peer || !h.claimMs) return t.pass('this repository is not shared by processes')
    const log = new SessionLog(sessionId(4))
    const key = idempotencyKey('tenant-a', null, 'stalled')
    const mine = await claim.call(h.repo.idempotency, key, 'fp-stalled')
    if (mine.kind !== 'claimed' || mine.at === undefined) return t.fail(`claimed with its time: ${JSON.stringify(mine)}`)
    // This process stalls: its claim is no longer renewed, expires, and another process takes the key over.
    h.repo.idempotency.completed?.(key)
    await new Promise((r) => setTimeout(r, h.claimMs! + 300))
    const peer = await h.peer()
    t.match(await peer.idempotency.claim!(key, 'fp-stalled'), { kind: 'claimed' }, 'taken over')
    const created = log.create()
    const w: IdempotencyWrite = {
      key,
      record: { fingerprint: 'fp-stalled', created_at: Date.now(), outcome: { ok: true, value: { session_id: log.id } } },
      claim: mine.at,
    }
    const refused = await Promise.resolve(h.repo.commit(created.events, created.record, 0, [w])).then(
      () => null,
      (err: unknown) => err,
    )
    t.match(refused, { code: 'STORE_UNAVAILABLE', data: { reason: 'idempotency_claim_lost' } }, 'refused: the claim was lost')
    t.equal(await h.repo.sessions.get(log.id), undefined, 'the session was not stored')
    t.match(await peer.idempotency.claim!(key, 'fp-stalled'), { kind: 'running' }, "the key is the other process's still")
  })
}
