/** What the REST surface reports and exposes about itself (implemented by the app). */
export interface RestMetrics {
  observeHttp(method: string, route: string, status: number, seconds: number): void
  sseOpened(): void
  sseClosed(): void
  text(): Promise<string>
  readonly contentType: string
}
