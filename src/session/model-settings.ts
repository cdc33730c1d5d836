import type { JsonCheck, SchemaCompiler } from '../core/answer-schema.js'
import { BurrowError, invalidRequest } from '../core/errors.js'
import type { LlmClient } from '../core/llm.js'
import type { ToolDefinition } from '../core/messages.js'
import { SETTING_FIELDS, type ModelSettings, type ModelSettingsPatch, type ResponseFormat } from '../core/wire-settings.js'

const SETTING_NAMES = Object.keys(SETTING_FIELDS) as Array<keyof ModelSettings>

/** The model settings a request gives (a turn request also carries input, on_busy…): only those, as given. */
export function settingsOf(req: Partial<Record<keyof ModelSettings, unknown>>): ModelSettings {
  const out: Record<string, unknown> = {}
  for (const k of SETTING_NAMES) if (req[k] !== undefined) out[k] = structuredClone(req[k])
  return out as ModelSettings
}

/** The session's defaults after a PATCH's `model_settings` (a merge patch: null removes a field). */
export function patchedSettings(current: ModelSettings, patch: ModelSettingsPatch): ModelSettings {
  const out: Record<string, unknown> = { ...current }
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k]
    else if (v !== undefined) out[k] = structuredClone(v)
  }
  return out as ModelSettings
}

/** What one LLM call of a turn runs with: the session's defaults, then the turn's own settings, then a continuation's. */
export function effectiveSettings(...layers: Array<ModelSettings | undefined>): ModelSettings {
  return Object.assign({}, ...layers.filter(Boolean)) as ModelSettings
}

/**
 * Checks settings against what the session can do, before anything is recorded: a forced tool
 * must exist, a response schema must compile, and the provider must take the values
 * (`LlmClient.settingsProblem`). `root` names the field's parent in errors (`body`, `body/model_settings`).
 */
export function checkSettings(
  s: ModelSettings,
  tools: readonly ToolDefinition[],
  client: LlmClient,
  schemas: SchemaCompiler,
  root: string,
): void {
  const choice = s.tool_choice
  if (choice === 'required' && tools.length === 0) throw invalidRequest(`${root}/tool_choice`, "is 'required' but the session has no tools")
  if (typeof choice === 'object' && !tools.some((t) => t.name === choice.name))
    throw invalidRequest(`${root}/tool_choice/name`, `'${choice.name}' is not a tool of the session`)
  if (s.response_format?.type === 'json_schema') answerCheck(s.response_format, schemas, `${root}/response_format/json_schema/schema`)
  const problem = client.settingsProblem?.(s)
  if (problem) throw invalidRequest(`${root}/${problem.field}`, problem.message)
}

/** How a final answer must look: a JSON value matching the schema. */
function answerCheck(format: Extract<ResponseFormat, { type: 'json_schema' }>, schemas: SchemaCompiler, field: string): JsonCheck {
  try {
    return schemas(format.json_schema.schema)
  } catch (err) {
    throw invalidRequest(field, `is not a usable JSON Schema: ${(err as Error).message.slice(0, 300)}`)
  }
}

/**
 * The final answer of a turn that asked for `json_schema`, parsed and checked. An answer that is
 * not JSON, or does not match, is the provider answering malformed output: PROVIDER_ERROR.
 */
export function parseAnswer(format: ResponseFormat | undefined, text: string, schemas: SchemaCompiler): { value: unknown } | null {
  if (format?.type !== 'json_schema') return null
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new BurrowError('PROVIDER_ERROR', "The model's answer is not JSON, as response_format asked.", {
      reason: 'response_format_mismatch',
    })
  }
  const problem = answerCheck(format, schemas, 'response_format/json_schema/schema')(value)
  if (problem !== null)
    throw new BurrowError('PROVIDER_ERROR', `The model's answer does not match response_format: ${problem}.`, {
      reason: 'response_format_mismatch',
    })
  return { value }
}
