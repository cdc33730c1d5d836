// The shutdown fault chapter (test/contract/shutdown-faults.contract.ts) for each session
// backend this build has: ephemeral, and LMDB (where acknowledged turns are checked after a restart).
import t from 'tap'
import { shutdownFaultsContract } from '../contract/shutdown-faults.contract.js'

t.test('ephemeral', async (t) => shutdownFaultsContract(t, { env: { BURROW_SESSION_STORE: 'off' }, persistent: false }))
t.test('lmdb', async (t) =>
  shutdownFaultsContract(t, { env: { BURROW_SESSION_STORE: 'lmdb', BURROW_DURABILITY: 'fsync' }, persistent: true }),
)
