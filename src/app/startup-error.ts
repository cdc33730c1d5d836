/** A reason the service cannot start that the operator can fix; printed without a stack. */
export class StartupError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'StartupError'
  }
}
