/** Metrics seam: the service reports what happened; the app decides how it is exported. */
export interface Telemetry {
  turnEnded(status: 'completed' | 'requires_action' | 'failed', seconds: number): void
  providerCall(provider: string, outcome: 'ok' | 'error' | 'timeout' | 'aborted', seconds: number): void
  streamOpened(): void
  streamClosed(): void
}

export const NO_TELEMETRY: Telemetry = {
  turnEnded() {},
  providerCall() {},
  streamOpened() {},
  streamClosed() {},
}
