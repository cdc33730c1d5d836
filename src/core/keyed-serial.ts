/**
 * Runs tasks one at a time per key, keys in parallel: a task starts once the task before it with
 * the same key has settled, whether it resolved or rejected (each caller gets its own task's
 * outcome). What a feed of one session's events, or one tenant's catch-up, needs to stay in order
 * without holding up the others. A key is forgotten once its last task has settled.
 */
export class KeyedSerial {
  private readonly tails = new Map<string, Promise<void>>()

  run<T>(key: string, task: () => T | Promise<T>): Promise<T> {
    const result = (this.tails.get(key) ?? Promise.resolve()).then(task)
    const tail = result.then(
      () => undefined,
      () => undefined,
    )
    this.tails.set(key, tail)
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key)
    })
    return result
  }

  /** Keys with a task queued or running. */
  get size(): number {
    return this.tails.size
  }

  /** Resolves once every task queued so far, and any queued meanwhile, has settled. */
  async idle(): Promise<void> {
    while (this.tails.size > 0) await Promise.all([...this.tails.values()])
  }
}
