import { BurrowError, invalidRequest } from '../core/errors.js'
import { parseModelRef, type LlmClient, type ProviderRegistry, type ProviderStatus } from '../core/llm.js'

export interface ProviderSlot {
  name: string
  /** The client, or null when the provider has no credentials/endpoint. */
  client: LlmClient | null
  /** Which variable to set, for the `PROVIDER_NOT_CONFIGURED` message. */
  hint: string
  defaultModel: string
}

/** Resolves `provider:model` against the configured providers. */
export class StaticProviderRegistry implements ProviderRegistry {
  private readonly slots: Map<string, ProviderSlot>

  constructor(
    slots: ProviderSlot[],
    private readonly fallbackModel: string,
  ) {
    this.slots = new Map(slots.map((s) => [s.name, s]))
  }

  resolve(model: string): { client: LlmClient; model: string } {
    const ref = parseModelRef(model)
    if (!ref) throw invalidRequest('body/model', `must look like 'provider:model' (got '${model}')`)
    const slot = this.slots.get(ref.provider)
    if (!slot) throw invalidRequest('body/model', `names unknown provider '${ref.provider}' (known: ${[...this.slots.keys()].join(', ')})`)
    if (!slot.client)
      throw new BurrowError('PROVIDER_NOT_CONFIGURED', `Provider '${ref.provider}' is not configured: ${slot.hint}.`, {
        provider: ref.provider,
      })
    return { client: slot.client, model: ref.model }
  }

  status(): ProviderStatus[] {
    return [...this.slots.values()].map((s) => ({
      name: s.name,
      configured: s.client !== null,
      offline: s.client?.offline ?? false,
      default_model: s.defaultModel,
    }))
  }

  defaultModel(): string {
    return this.fallbackModel
  }
}
