/**
 * The typed HTTP client of Burrow: `new BurrowClient({ baseUrl, apiKey })`, the event
 * stream types, the error type and codes, and the wire types of requests and responses.
 * Wire types are exported as types only, so importing the client loads no schema library.
 */
export { BurrowClient } from './burrow-client.js'
export type { BurrowClientOptions, ClientCallContext, FetchLike } from './transport.js'
export type { EventStreamOptions, ReconnectInfo, StreamItem } from './event-stream.js'
export { TurnAssembler, type TurnOutcome } from './turn-stream.js'

export { BurrowError, ERROR_CODES, ERROR_TABLE, isErrorCode, type ErrorCode, type ErrorRow } from '../core/errors.js'
export { EVENT_TYPES, type EventData, type EventEnvelope, type EventType, type Usage } from '../core/events.js'
export type { SessionId } from '../core/ids.js'
export type {
  ContentBlock,
  ImageBlock,
  Message,
  TextBlock,
  ToolCall,
  ToolDefinition,
  ToolResultBlock,
  ToolResultInput,
  ToolUseBlock,
} from '../core/messages.js'
export type { SessionNote } from '../core/session-record.js'
export type { CallContext, EventPage, SessionOperations, StreamControl, StreamFrame } from '../core/session-service.js'
export type {
  AccessToken,
  Capabilities,
  CompactionOutcome,
  CreateSession,
  InterruptResult,
  MemoryAdd,
  MemoryAdded,
  MemorySearchQuery,
  MemorySearchResult,
  Page,
  Problem,
  ResumeTurn,
  SessionCreated,
  SessionQuery,
  SessionStatus,
  SessionSummary,
  SessionView,
  StartTurn,
  TokenRequest,
  TurnResult,
} from '../core/wire.js'
