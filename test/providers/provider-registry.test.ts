// StaticProviderRegistry and parseModelRef: `provider:model` resolution.
import t from 'tap'
import { parseModelRef } from '../../src/core/llm.js'
import { OfflineProvider } from '../../src/providers/offline-provider.js'
import { OpenAiProvider } from '../../src/providers/openai-provider.js'
import { ProviderHttp } from '../../src/providers/provider-http.js'
import { StaticProviderRegistry } from '../../src/providers/provider-registry.js'
import { isCode, thrown } from '../helpers/errors.js'

const http = new ProviderHttp({
  headersTimeoutMs: 500,
  idleTimeoutMs: 300,
  connectTimeoutMs: 1000,
  maxRetries: 0,
  retryBaseMs: 5,
  retryMaxMs: 50,
})
t.teardown(() => http.close())

const offline = new OfflineProvider()
const openai = new OpenAiProvider(http, { baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'k', defaultModel: 'openai:gpt-4o-mini' })

function registry(): StaticProviderRegistry {
  return new StaticProviderRegistry(
    [
      { name: 'anthropic', client: null, hint: 'set ANTHROPIC_API_KEY', defaultModel: 'anthropic:claude-sonnet-4-5' },
      { name: 'openai', client: openai, hint: 'set OPENAI_API_KEY', defaultModel: 'openai:gpt-4o-mini' },
      { name: 'offline', client: offline, hint: 'always available', defaultModel: 'offline:echo' },
    ],
    'offline:echo',
  )
}

t.test('parseModelRef splits at the first colon', async (t) => {
  t.same(parseModelRef('openai:gpt-4o-mini'), { provider: 'openai', model: 'gpt-4o-mini' })
  t.same(parseModelRef('anthropic:claude-sonnet-4-5'), { provider: 'anthropic', model: 'claude-sonnet-4-5' })
  t.same(parseModelRef('openai:llama3.1:8b'), { provider: 'openai', model: 'llama3.1:8b' }, 'model names may contain colons')
  for (const bad of ['', 'gpt-4o', ':gpt-4o', 'openai:', ':']) t.equal(parseModelRef(bad), null, `'${bad}' is not a model ref`)
})

t.test('resolve returns the configured client and the bare model', async (t) => {
  const reg = registry()
  const a = reg.resolve('openai:gpt-4o-mini')
  t.equal(a.client, openai)
  t.equal(a.model, 'gpt-4o-mini')
  const b = reg.resolve('offline:echo')
  t.equal(b.client, offline)
  t.equal(b.model, 'echo')
  t.equal(reg.resolve('openai:qwen2.5:7b').model, 'qwen2.5:7b')
})

t.test('a malformed model string → INVALID_REQUEST on body/model', async (t) => {
  const reg = registry()
  for (const bad of ['gpt-4o', 'openai:', ':echo', '']) {
    const err = thrown(() => reg.resolve(bad))
    if (isCode(t, err, 'INVALID_REQUEST')) {
      t.same(err.data, { field: 'body/model' })
      t.equal(err.status, 400)
    }
  }
})

t.test('an unknown provider → INVALID_REQUEST on body/model', async (t) => {
  const err = thrown(() => registry().resolve('mistral:large'))
  if (isCode(t, err, 'INVALID_REQUEST')) {
    t.equal(err.data?.field, 'body/model')
    t.match(err.message, /mistral/)
  }
})

t.test('a provider without credentials → PROVIDER_NOT_CONFIGURED naming what to set', async (t) => {
  const err = thrown(() => registry().resolve('anthropic:claude-sonnet-4-5'))
  if (isCode(t, err, 'PROVIDER_NOT_CONFIGURED')) {
    t.same(err.data, { provider: 'anthropic' })
    t.match(err.message, /ANTHROPIC_API_KEY/)
    t.equal(err.status, 503)
  }
})

t.test('status() lists every slot', async (t) => {
  t.same(registry().status(), [
    { name: 'anthropic', configured: false, offline: false, default_model: 'anthropic:claude-sonnet-4-5' },
    { name: 'openai', configured: true, offline: false, default_model: 'openai:gpt-4o-mini' },
    { name: 'offline', configured: true, offline: true, default_model: 'offline:echo' },
  ])
  t.same(new StaticProviderRegistry([], 'offline:echo').status(), [])
})

t.test('defaultModel() is the fallback model', async (t) => {
  t.equal(registry().defaultModel(), 'offline:echo')
  t.equal(new StaticProviderRegistry([], 'openai:gpt-4o-mini').defaultModel(), 'openai:gpt-4o-mini')
})

t.test('a resolved client works end to end (offline)', async (t) => {
  const { client, model } = registry().resolve('offline:echo')
  const res = await client.complete({ model, maxTokens: 32, messages: [{ role: 'user', content: [{ type: 'text', text: 'ping' }] }] })
  t.same(res.content, [{ type: 'text', text: 'echo: ping' }])
})
