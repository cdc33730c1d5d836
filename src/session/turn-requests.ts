import type { SchemaCompiler } from '../core/answer-schema.js'
import { BurrowError, invalidRequest } from '../core/errors.js'
import type { ProviderRegistry } from '../core/llm.js'
import type { ContentBlock } from '../core/messages.js'
import { isDeepStrictEqual } from 'node:util'
import type { ToolDefinition } from '../core/messages.js'
import type { EffectiveCompaction, SessionChanges, SessionConfig } from '../core/session-record.js'
import type { BuiltinTool } from '../core/tools.js'
import type { CreateSession, ModelSettings, StartTurn, UpdateSession } from '../core/wire.js'
import { checkBudget } from './budget.js'
import { checkSettings, effectiveSettings, patchedSettings, settingsOf } from './model-settings.js'
import type { LiveSession } from './live-session.js'
import type { TurnStart } from './turn.js'

/**
 * Levels a tool's `input_schema` may nest. Real tool schemas stay within a dozen; the bound
 * keeps what is cloned, stored and sent to providers (all recursive) far from the
 * stack's limit, on every surface, before anything is recorded.
 */
export const MAX_INPUT_SCHEMA_DEPTH = 64

/** What a new session's configuration is checked against and completed from. */
export interface SessionConfigRules {
  capabilities: { session_compaction: boolean; memory_store: boolean }
  providers: ProviderRegistry
  /** Their names are reserved. */
  builtinTools?: readonly BuiltinTool[] | undefined
  compactionDefaults: EffectiveCompaction
  /** Compiles response_format schemas (checked when settings are given). */
  schemas: SchemaCompiler
}

/** What a turn request is checked with. */
export type TurnRules = Pick<SessionConfigRules, 'providers' | 'builtinTools' | 'schemas'>

/** The configuration a session is created with: capability checks, defaults, tool names. */
export function sessionConfig(tenant: string, req: CreateSession, deps: SessionConfigRules): SessionConfig {
  const caps = deps.capabilities
  if (req.compaction !== undefined && !caps.session_compaction) throw new BurrowError('SESSION_COMPACTION_DISABLED')
  if (req.memory === true && !caps.memory_store) throw new BurrowError('MEMORY_STORE_DISABLED')
  const model = req.model ?? deps.providers.defaultModel()
  const { client } = deps.providers.resolve(model)
  checkTools(req.tools ?? [], deps)
  const modelSettings = settingsOf(req.model_settings ?? {})
  checkSettings(
    modelSettings,
    toolsOf(req.tools ?? [], req.memory ?? false, deps.builtinTools),
    client,
    deps.schemas,
    'body/model_settings',
  )
  return {
    tenant,
    model,
    system_prompt: req.system_prompt ?? '',
    metadata: { ...(req.metadata ?? {}) },
    memory: req.memory ?? false,
    compaction: caps.session_compaction ? { ...deps.compactionDefaults, ...(req.compaction ?? {}) } : null,
    tools: structuredClone(req.tools ?? []),
    max_total_tokens: req.max_total_tokens ?? null,
    model_settings: modelSettings,
  }
}

/** Every tool a session's model may call: its client tools and the built-in ones it has on. */
function toolsOf(client: readonly ToolDefinition[], memory: boolean, builtins: readonly BuiltinTool[] = []): ToolDefinition[] {
  return [...client, ...builtins.filter((t) => t.enabledFor({ memory })).map((t) => t.definition)]
}

/** Client tools: unique names, none a built-in tool's, schemas of bounded depth. */
function checkTools(tools: readonly ToolDefinition[], deps: SessionConfigRules): void {
  const names = new Set<string>()
  const builtinNames = new Set((deps.builtinTools ?? []).map((t) => t.definition.name))
  for (const [i, t] of tools.entries()) {
    if (names.has(t.name)) throw invalidRequest(`body/tools/${i}/name`, `duplicates tool name '${t.name}'`)
    if (builtinNames.has(t.name)) throw invalidRequest(`body/tools/${i}/name`, `'${t.name}' is a built-in tool name`)
    if (nestsDeeper(t.input_schema, MAX_INPUT_SCHEMA_DEPTH))
      throw invalidRequest(`body/tools/${i}/input_schema`, `nests deeper than ${MAX_INPUT_SCHEMA_DEPTH} levels`)
    names.add(t.name)
  }
}

/** Metadata entries a session may hold (as at creation). */
const METADATA_MAX = 64

/**
 * What a `PATCH` changes in a session's configuration, checked as creation checks it: the new
 * values in full, and only those that differ from the current ones (empty: nothing changes).
 */
export function sessionChanges(current: SessionConfig, req: UpdateSession, deps: SessionConfigRules): SessionChanges {
  const out: SessionChanges = {}
  if (req.metadata !== undefined) {
    const metadata = { ...current.metadata }
    for (const [k, v] of Object.entries(req.metadata)) {
      if (v === null) delete metadata[k]
      else metadata[k] = v
    }
    if (Object.keys(metadata).length > METADATA_MAX) throw invalidRequest('body/metadata', `would leave more than ${METADATA_MAX} entries`)
    if (!isDeepStrictEqual(metadata, current.metadata)) out.metadata = metadata
  }
  if (req.system_prompt !== undefined && req.system_prompt !== current.system_prompt) out.system_prompt = req.system_prompt
  if (req.tools !== undefined) {
    checkTools(req.tools, deps)
    if (!isDeepStrictEqual(req.tools, current.tools)) out.tools = structuredClone(req.tools)
  }
  if (req.compaction !== undefined) {
    if (!deps.capabilities.session_compaction || current.compaction === null) throw new BurrowError('SESSION_COMPACTION_DISABLED')
    const compaction = { ...current.compaction, ...req.compaction }
    if (!isDeepStrictEqual(compaction, current.compaction)) out.compaction = compaction
  }
  if (req.model_settings !== undefined) {
    const settings = patchedSettings(current.model_settings ?? {}, req.model_settings)
    if (!isDeepStrictEqual(settings, current.model_settings ?? {})) out.model_settings = settings
  }
  // New defaults, or new tools the defaults name: checked together, as they will run.
  if (out.model_settings || out.tools) {
    const tools = toolsOf(out.tools ?? current.tools, current.memory, deps.builtinTools)
    const { client } = deps.providers.resolve(current.model)
    checkSettings(out.model_settings ?? current.model_settings ?? {}, tools, client, deps.schemas, 'body/model_settings')
  }
  return out
}

/**
 * How a turn request is checked: `allowContinue`, neither input nor results (resume);
 * `replacingPaused`, a turn paused for tool results is closed for it (`on_busy: interrupt`);
 * `ahead`, checked before it waits in line or interrupts: what runs now is not a refusal.
 */
export interface TurnStartOptions {
  allowContinue?: boolean
  replacingPaused?: boolean
  ahead?: boolean
}

/** Checks a turn request against the session's state; throws before anything is recorded. */
export function turnStart(session: LiveSession, req: StartTurn, rules: TurnRules, opts: TurnStartOptions = {}): TurnStart {
  const { allowContinue = false, replacingPaused = false, ahead = false } = opts
  if (session.record.status === 'archived') throw new BurrowError('SESSION_ARCHIVED', `Session ${session.id} is archived.`)
  if (session.running && !ahead) throw new BurrowError('SESSION_BUSY', `A turn is already running on session ${session.id}.`)
  const hasInput = req.input !== undefined
  const hasResults = req.tool_results !== undefined
  if (hasInput && hasResults) throw invalidRequest('body', "must have exactly one of 'input' or 'tool_results'")
  if (!hasInput && !hasResults && !allowContinue) throw invalidRequest('body', "must have exactly one of 'input' or 'tool_results'")
  const open = session.record.open_turn
  if (!hasResults) {
    const waitedFor = open?.state === 'running' ? ahead : replacingPaused // what the request may wait for or close
    if (open && !waitedFor) {
      const pending = open.pending_tool_calls.filter((c) => open.client_tool_call_ids.includes(c.id)).map((c) => c.id)
      throw new BurrowError(
        'SESSION_BUSY',
        `Turn ${open.turn} is waiting for tool_results (${pending.join(', ')}); send them or interrupt the turn.`,
        { pending_tool_call_ids: pending },
      )
    }
    checkBudget(session.record)
    const settings = turnSettings(session, req, rules)
    if (!hasInput) return { kind: 'continue', ...settings }
    const input: ContentBlock[] = typeof req.input === 'string' ? [{ type: 'text', text: req.input }] : req.input!
    return { kind: 'input', input, ...settings }
  }
  if (!open || open.state !== 'requires_action')
    throw invalidRequest('body/tool_results', 'were sent but no turn is waiting for tool results')
  const waiting = open.pending_tool_calls.filter(
    (c) => open.client_tool_call_ids.includes(c.id) && !open.results.some((r) => r.tool_use_id === c.id),
  )
  const ids = new Set(waiting.map((c) => c.id))
  const seen = new Set<string>()
  for (const [i, r] of req.tool_results!.entries()) {
    if (!ids.has(r.tool_call_id))
      throw invalidRequest(
        `body/tool_results/${i}/tool_call_id`,
        `'${r.tool_call_id}' is not a pending tool call (pending: ${[...ids].join(', ')})`,
      )
    if (seen.has(r.tool_call_id)) throw invalidRequest(`body/tool_results/${i}/tool_call_id`, `answers '${r.tool_call_id}' twice`)
    seen.add(r.tool_call_id)
  }
  const missing = [...ids].filter((x) => !seen.has(x))
  if (missing.length > 0) throw invalidRequest('body/tool_results', `must answer every pending tool call; missing: ${missing.join(', ')}`)
  return { kind: 'tool_results', results: req.tool_results!, ...turnSettings(session, req, rules, open.settings) }
}

/** A turn request's own model settings, and what its calls run with, checked against the session and its provider. */
function turnSettings(
  session: LiveSession,
  req: StartTurn,
  rules: TurnRules,
  paused?: ModelSettings,
): { settings: ModelSettings; effective: ModelSettings } {
  const config = session.record.config
  const { client } = rules.providers.resolve(config.model)
  const settings = settingsOf(req)
  const effective = effectiveSettings(config.model_settings, paused, settings)
  checkSettings(effective, toolsOf(config.tools, config.memory, rules.builtinTools), client, rules.schemas, 'body')
  return { settings, effective }
}

/** Whether a JSON value nests more than `max` objects or arrays deep; iterative, so any depth is safe to measure. */
function nestsDeeper(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]]
  for (let e = stack.pop(); e !== undefined; e = stack.pop()) {
    const [v, depth] = e
    if (typeof v !== 'object' || v === null) continue
    if (depth > max) return true
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth + 1])
  }
  return false
}
