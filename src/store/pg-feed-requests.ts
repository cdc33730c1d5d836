import { randomUUID } from 'node:crypto'

/**
 * Requests this replica sends to the others over the change feed, each answered by its id: what
 * an interrupt and a lease request share. `ask` sends a request with a new id and waits for its
 * answer, or for `timeout` when none comes within the wait; a partial answer may extend the wait
 * (an interrupt's `found`, then its `done` once the turn has ended there).
 */
export class FeedRequests {
  private readonly waiting = new Map<string, { answer: (value: unknown) => void; extend: () => void }>()

  /**
   * Sends the request (`send` gets its id) and resolves with its answer, or `timeout` after `waitMs`
   * without one; once the request is being answered (`extend`), the wait restarts at `answeringMs`.
   */
  async ask<A>(send: (id: string) => Promise<void>, waitMs: number, timeout: A, answeringMs = waitMs): Promise<A> {
    const id = randomUUID()
    let timer: NodeJS.Timeout | undefined
    const answer = new Promise<A>((resolve) => {
      const wait = (ms: number) => {
        clearTimeout(timer)
        timer = setTimeout(() => resolve(timeout), ms)
      }
      wait(waitMs)
      this.waiting.set(id, { answer: (value) => resolve(value as A), extend: () => wait(answeringMs) })
    })
    try {
      await send(id)
      return await answer
    } finally {
      clearTimeout(timer)
      this.waiting.delete(id)
    }
  }

  /** The request's answer (ignored when it is no longer waited for). */
  answered(id: string, value: unknown): void {
    this.waiting.get(id)?.answer(value)
  }

  /** The request is being answered: its wait restarts (at the request's `answeringMs`). */
  extend(id: string): void {
    this.waiting.get(id)?.extend()
  }
}
