/**
 * Model settings (docs/api.md, "Model settings"): how an LLM call is sampled and shaped. A turn
 * may give them; a session holds defaults for its turns. The busy policy of a turn request lives
 * here too: it is a turn option like these, not part of the conversation.
 */
import { Type, type Static, type TSchema } from 'typebox'
import { ObjectSchemaSchema } from './messages.js'

const Strict = { additionalProperties: false } as const

const ToolChoiceSchema = Type.Union(
  [
    Type.Literal('auto'),
    Type.Literal('none'),
    Type.Literal('required'),
    Type.Object({ type: Type.Literal('tool'), name: Type.String({ pattern: '^[a-zA-Z0-9_-]{1,64}$' }) }, Strict),
  ],
  {
    description:
      'Which tools the model may call: auto (default), none, required (some tool), or {type: "tool", name} (that tool). ' +
      'A required or named tool applies to the first LLM call of the turn; the calls after it are auto.',
  },
)

const ResponseFormatSchema = Type.Union(
  [
    Type.Object({ type: Type.Literal('text') }, Strict),
    Type.Object(
      {
        type: Type.Literal('json_schema'),
        json_schema: Type.Object(
          {
            name: Type.String({ pattern: '^[a-zA-Z0-9_-]{1,64}$', description: 'A name for the schema (sent to providers that ask one).' }),
            description: Type.Optional(Type.String({ maxLength: 4096 })),
            schema: Type.With(ObjectSchemaSchema, { description: 'JSON Schema of the final answer (an object schema).' }),
            strict: Type.Optional(Type.Boolean({ description: "Passed to providers with a strict mode (OpenAI's)." })),
          },
          Strict,
        ),
      },
      Strict,
    ),
  ],
  {
    description:
      "The final answer's format. json_schema: the providers' native structured output; the answer is checked against the " +
      'schema and returned parsed as output_json (an answer that does not match fails the turn with PROVIDER_ERROR).',
  },
)

/** Each setting's schema, once: the turn and session fields (optional) and the PATCH fields (nullable) derive from it. */
export const SETTING_FIELDS = {
  temperature: Type.Number({ minimum: 0, maximum: 2, description: 'Sampling temperature (Anthropic models take 0 to 1).' }),
  top_p: Type.Number({ minimum: 0, maximum: 1, description: 'Nucleus sampling.' }),
  max_tokens: Type.Integer({ minimum: 1, maximum: 200_000, description: 'Output token limit per LLM call of the turn.' }),
  stop: Type.Array(Type.String({ minLength: 1, maxLength: 256 }), {
    minItems: 1,
    maxItems: 4,
    description: 'Stop sequences: the answer ends before the first one the model produces.',
  }),
  tool_choice: ToolChoiceSchema,
  response_format: ResponseFormatSchema,
  reasoning_effort: Type.Union([Type.Literal('minimal'), Type.Literal('low'), Type.Literal('medium'), Type.Literal('high')], {
    description:
      "Reasoning effort: OpenAI's reasoning_effort, Anthropic's effort (minimal is sent as low); ignored by the offline provider.",
  }),
} satisfies Record<string, TSchema>

type Fields = typeof SETTING_FIELDS
export const ModelSettingsSchema = Type.Partial(Type.Object(SETTING_FIELDS), {
  ...Strict,
  description: "Model settings: a turn's own override the session's defaults field by field.",
})
export type ModelSettings = Static<typeof ModelSettingsSchema>
export type ToolChoice = Static<typeof ToolChoiceSchema>
export type ResponseFormat = Static<typeof ResponseFormatSchema>

const nullable = <K extends keyof Fields>(k: K) => Type.Optional(Type.Union([SETTING_FIELDS[k], Type.Null()]))

/** `PATCH`'s `model_settings`: a JSON merge patch of the session's defaults (null removes one). */
export const ModelSettingsPatchSchema = Type.Object(
  {
    temperature: nullable('temperature'),
    top_p: nullable('top_p'),
    max_tokens: nullable('max_tokens'),
    stop: nullable('stop'),
    tool_choice: nullable('tool_choice'),
    response_format: nullable('response_format'),
    reasoning_effort: nullable('reasoning_effort'),
  },
  { ...Strict, description: "Merged into the session's default model settings: a field with a value is set, a field with null removed." },
)
export type ModelSettingsPatch = Static<typeof ModelSettingsPatchSchema>

export const OnBusySchema = Type.Union([Type.Literal('reject'), Type.Literal('queue'), Type.Literal('interrupt')], {
  description:
    'When a turn already runs on the session: reject (default; 409 SESSION_BUSY), queue (wait in order behind it; bounded, ' +
    'a full queue is SESSION_BUSY), or interrupt (cancel it, then run).',
})
export type OnBusy = Static<typeof OnBusySchema>
