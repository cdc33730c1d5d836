/** Metrics seam: the service reports what happened; the app decides how it is exported. */
export interface Telemetry {
  turnEnded(status: 'completed' | 'requires_action' | 'failed', seconds: number): void
  providerCall(provider: string, outcome: 'ok' | 'error' | 'timeout' | 'aborted', seconds: number): void
  /** Tokens one successful LLM call used (turns and compactions alike); `model` is the provider's own name. */
  llmUsage(provider: string, model: string, inputTokens: number, outputTokens: number): void
  streamOpened(): void
  streamClosed(): void
}

export const NO_TELEMETRY: Telemetry = {
  turnEnded() {},
  providerCall() {},
  llmUsage() {},
  streamOpened() {},
  streamClosed() {},
}
