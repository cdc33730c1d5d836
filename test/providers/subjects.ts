// The network providers as subjects of the LLM client contract (test/contract/llm-client.contract.ts):
// how to build each client, and the few wire facts the suite needs.
import type { LlmClientSubject } from '../contract/llm-client.contract.js'
import { AnthropicProvider } from '../../src/providers/anthropic-provider.js'
import { OpenAiProvider } from '../../src/providers/openai-provider.js'

const anthropicEvent = (data: Record<string, unknown>) => `event: ${String(data.type)}\ndata: ${JSON.stringify(data)}\n\n`

export const ANTHROPIC: LlmClientSubject = {
  provider: 'anthropic',
  model: 'claude-sonnet-4-5',
  path: '/v1/messages',
  fakeOptions: (key) => ({ anthropicKey: key }),
  client: (http, origin, apiKey) => new AnthropicProvider(http, { baseUrl: origin, apiKey, defaultModel: 'anthropic:claude-sonnet-4-5' }),
  maxTokensStop: 'max_tokens',
  errorMidStream: (message) => [
    anthropicEvent({
      type: 'message_start',
      message: { id: 'm1', type: 'message', role: 'assistant', content: [], usage: { input_tokens: 3, output_tokens: 1 } },
    }),
    anthropicEvent({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
    anthropicEvent({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'par' } }),
    anthropicEvent({ type: 'error', error: { type: 'overloaded_error', message } }),
  ],
}

export const OPENAI: LlmClientSubject = {
  provider: 'openai',
  model: 'gpt-4o-mini',
  path: '/v1/chat/completions',
  fakeOptions: (key) => ({ openaiKey: key }),
  client: (http, origin, apiKey) => new OpenAiProvider(http, { baseUrl: `${origin}/v1`, apiKey, defaultModel: 'openai:gpt-4o-mini' }),
  maxTokensStop: 'length',
  errorMidStream: (message) => [
    'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"par"},"finish_reason":null}]}\n\n',
    `data: ${JSON.stringify({ error: { message, type: 'server_error' } })}\n\n`,
  ],
}
