import t from 'tap'
import { MemorySessionRepository } from '../../src/store/memory-session-repository.js'
import { sessionStoreContract } from '../contract/session-store.contract.js'
import { eventStoreContract } from '../contract/event-store.contract.js'

const factory = async () => ({ repo: new MemorySessionRepository(), cleanup: async () => {} })
t.test('session store contract (in-memory reference)', async (t) => sessionStoreContract(t, factory))
t.test('event store contract (in-memory reference)', async (t) => eventStoreContract(t, factory))
