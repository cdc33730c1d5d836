import { Type, type TSchema } from 'typebox'
import type { CallContext, SessionOperations } from '../../core/session-service.js'
import {
  CreateSessionSchema,
  MemoryAddSchema,
  MemoryPageQuerySchema,
  MemoryRefSchema,
  MemorySearchQuerySchema,
  NoParamsSchema,
  NoteKeySchema,
  SessionIdSchema,
  SessionQuerySchema,
  SessionRefSchema,
  SessionTurnSchema,
  UpdateSessionSchema,
  ForkSessionSchema,
} from '../../core/wire.js'

const Strict = { additionalProperties: false } as const
const SessionId = SessionIdSchema
const IdempotencyKey = Type.Optional(Type.String({ minLength: 1, maxLength: 255 }))
const TurnParams = Type.Object({ ...SessionTurnSchema.properties, idempotency_key: IdempotencyKey }, Strict)
const SessionOnly = SessionRefSchema
const MemoryIdOnly = MemoryRefSchema
const SessionKeyed = Type.Object({ session_id: SessionId, idempotency_key: IdempotencyKey }, Strict)

/** One JSON-RPC method: its params schema and how it calls the service. */
export interface RpcMethod {
  params: TSchema
  /** Mutating methods take an `idempotency_key` param, turned into the CallContext's key. */
  run(ops: SessionOperations, params: any, ctx: CallContext): Promise<unknown>
}

/**
 * The one method table both transports use (HTTP `POST /rpc` and stdio). Method names are
 * `noun/verb`; params are the REST bodies in snake_case, with `session_id` where REST has
 * it in the path. Results are the REST results.
 */
export const RPC_METHODS: Record<string, RpcMethod> = {
  'session/create': {
    params: Type.Object({ ...CreateSessionSchema.properties, idempotency_key: IdempotencyKey }, Strict),
    run: (ops, { idempotency_key: _k, ...req }, ctx) => ops.createSession(req, ctx),
  },
  'turn/start': {
    params: TurnParams,
    run: (ops, { session_id, idempotency_key: _k, ...req }, ctx) => ops.startTurn(session_id, req, ctx),
  },
  'session/resume': {
    params: TurnParams,
    run: (ops, { session_id, idempotency_key: _k, ...req }, ctx) => ops.resume(session_id, req, ctx),
  },
  'session/read': { params: SessionOnly, run: (ops, p, ctx) => ops.read(p.session_id, ctx) },
  'session/list': { params: SessionQuerySchema, run: (ops, p, ctx) => ops.list(p, ctx) },
  'session/update': {
    params: Type.Object(
      { session_id: SessionId, ...UpdateSessionSchema.properties, idempotency_key: IdempotencyKey },
      { ...Strict, minProperties: 2 },
    ),
    run: (ops, { session_id, idempotency_key: _k, ...req }, ctx) => ops.updateSession(session_id, req, ctx),
  },
  'session/fork': {
    params: Type.Object({ session_id: SessionId, ...ForkSessionSchema.properties, idempotency_key: IdempotencyKey }, Strict),
    run: (ops, { session_id, idempotency_key: _k, ...req }, ctx) => ops.forkSession(session_id, req, ctx),
  },
  'session/archive': {
    params: SessionKeyed,
    run: async (ops, p, ctx) => {
      await ops.archive(p.session_id, ctx)
      return { session_id: p.session_id, status: 'archived' }
    },
  },
  'session/delete': {
    params: SessionOnly,
    run: async (ops, p, ctx) => {
      await ops.delete(p.session_id, ctx)
      return { session_id: p.session_id, deleted: true }
    },
  },
  'session/compact': { params: SessionKeyed, run: (ops, p, ctx) => ops.compact(p.session_id, ctx) },
  'turn/interrupt': { params: SessionOnly, run: (ops, p, ctx) => ops.interrupt(p.session_id, ctx) },
  'memory/search': { params: MemorySearchQuerySchema, run: (ops, p, ctx) => ops.searchMemory(p, ctx) },
  'memory/add': {
    params: Type.Object({ entries: MemoryAddSchema, idempotency_key: IdempotencyKey }, Strict),
    run: (ops, p, ctx) => ops.addMemory(p.entries, ctx),
  },
  'memory/list': { params: MemoryPageQuerySchema, run: (ops, p, ctx) => ops.listMemory(p, ctx) },
  'memory/get': { params: MemoryIdOnly, run: (ops, p, ctx) => ops.getMemory(p.id, ctx) },
  'memory/delete': {
    params: MemoryIdOnly,
    run: async (ops, p, ctx) => {
      await ops.deleteMemory(p.id, ctx)
      return { id: p.id, deleted: true }
    },
  },
  'notes/list': { params: SessionOnly, run: async (ops, p, ctx) => ({ notes: await ops.listNotes(p.session_id, ctx) }) },
  'notes/put': {
    params: Type.Object({ session_id: SessionId, key: NoteKeySchema, value: Type.String({ maxLength: 2000 }) }, Strict),
    run: (ops, p, ctx) => ops.putNote(p.session_id, p.key, p.value, ctx),
  },
  'notes/delete': {
    params: Type.Object({ session_id: SessionId, key: NoteKeySchema }, Strict),
    run: async (ops, p, ctx) => ({ deleted: await ops.deleteNote(p.session_id, p.key, ctx) }),
  },
  'capabilities/get': { params: NoParamsSchema, run: (ops, _p, ctx) => ops.getCapabilities(ctx) },
  'events/list_since': {
    params: Type.Object(
      {
        session_id: SessionId,
        after: Type.Optional(Type.Integer({ minimum: 0 })),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
      },
      Strict,
    ),
    run: (ops, p, ctx) => ops.listEvents(p.session_id, { after: p.after ?? 0, limit: p.limit ?? 100 }, ctx),
  },
}
