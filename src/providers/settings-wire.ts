import type { LlmRequest } from '../core/llm.js'
import type { ModelSettings } from '../core/wire.js'

/**
 * A turn's model settings in each provider's request body (docs/api.md, "Model settings").
 * `tool_choice` goes only with tools: both APIs refuse it without any.
 */

/** OpenAI Chat Completions (and compatible servers): the fields as the API names them. */
export function openAiSettings(req: LlmRequest): Record<string, unknown> {
  const s = req.settings
  if (!s) return {}
  const out: Record<string, unknown> = {}
  if (s.temperature !== undefined) out.temperature = s.temperature
  if (s.top_p !== undefined) out.top_p = s.top_p
  if (s.stop) out.stop = s.stop
  if (s.reasoning_effort) out.reasoning_effort = s.reasoning_effort
  const choice = s.tool_choice
  if (choice !== undefined && req.tools && req.tools.length > 0)
    out.tool_choice = typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } }
  const format = s.response_format
  if (format?.type === 'json_schema') {
    const j = format.json_schema
    out.response_format = {
      type: 'json_schema',
      json_schema: {
        name: j.name,
        ...(j.description ? { description: j.description } : {}),
        schema: j.schema,
        ...(j.strict !== undefined ? { strict: j.strict } : {}),
      },
    }
  }
  return out
}

const ANTHROPIC_CHOICE = { auto: 'auto', none: 'none', required: 'any' } as const

/** Anthropic Messages: `stop_sequences`, `tool_choice` objects, and `output_config` (effort, JSON schema format). */
export function anthropicSettings(req: LlmRequest): Record<string, unknown> {
  const s = req.settings
  if (!s) return {}
  const out: Record<string, unknown> = {}
  if (s.temperature !== undefined) out.temperature = s.temperature
  if (s.top_p !== undefined) out.top_p = s.top_p
  if (s.stop) out.stop_sequences = s.stop
  const choice = s.tool_choice
  if (choice !== undefined && req.tools && req.tools.length > 0)
    out.tool_choice = typeof choice === 'string' ? { type: ANTHROPIC_CHOICE[choice] } : { type: 'tool', name: choice.name }
  const config: Record<string, unknown> = {}
  if (s.reasoning_effort) config.effort = s.reasoning_effort === 'minimal' ? 'low' : s.reasoning_effort
  if (s.response_format?.type === 'json_schema') config.format = { type: 'json_schema', schema: s.response_format.json_schema.schema }
  if (Object.keys(config).length > 0) out.output_config = config
  return out
}

/** Anthropic's sampling range is narrower than OpenAI's. */
export function anthropicSettingsProblem(s: ModelSettings): { field: string; message: string } | null {
  if (s.temperature !== undefined && s.temperature > 1) return { field: 'temperature', message: 'must be at most 1 for anthropic models' }
  return null
}
